/**
 * @module Scenario `flood` (issue 37): does one IP flooding an exhausted bucket slow a legitimate client down?
 * A second client (its own IP via X-Forwarded-For, its own token) sends FLOOD_RATE req/s open loop
 * (bench/paced.ts: no coordinated omission) to the status path, every request forwarded (200): once
 * alone, then while one IP sends `GET /api/v1/exhausted` (a 1-per-hour bucket it has exhausted: every
 * answer a 429) as fast as CONNECTIONS keep-alive connections get answers (bench/million.ts). Its
 * p50/p99/max each time, the p99 added by the flood, and the flood's req/s. Each system alone, started fresh.
 */
import { fmtInt, fmtMs } from '../lib/format.js';
import { expectStatus } from '../lib/measure.js';
import { cpuMsOfTree, runScript, sleep } from '../lib/procs.js';
import { CONNECTIONS, LABELS, QUICK, REDIS_SYSTEMS, results, ROUNDS } from '../lib/settings.js';
import { env, startSystem, stopServer, unavailable, type Server } from '../lib/systems.js';
import type { FloodResult, FloodRound, PacedResult } from '../lib/types.js';
import { statusPath } from './forwarded.js';

/** The systems of the scenario, in the table's order. */
export const FLOOD_KEYS = ['rategate-memory', 'rategate-redis', 'fastify'] as const;
export type FloodKey = (typeof FLOOD_KEYS)[number];
/** The second client's rate, req/s, and each phase's measured seconds (after a 1 s warm-up of its own). */
export const FLOOD_RATE = 100;
export const FLOOD_PHASE_SEC = QUICK ? 4 : 8;
const PACED_WARMUP_SEC = 1;
/** The second client: a public-looking documentation address (TEST-NET-2), not the flood's. */
const LEGIT_IP = '198.51.100.20';
/** The flood's one client IP is million.ts's client number FLOOD_CLIENT (85.198.192.9). */
const FLOOD_CLIENT = 3_000_000;
/** One request in flight per flood connection: a client that waits for each answer, as fast as they come. */
const FLOOD_DEPTH = 1;
/** The flood runs this long before the second client starts, and outlasts it by the slack (its start-up). */
const FLOOD_LEAD_SEC = 1;
const FLOOD_SLACK_SEC = 4;

interface MillionOut {
  n: number;
  seconds: number;
  rps: number;
  statuses: Record<string, number>;
  errors: number;
}

function secondClient(port: number): Promise<PacedResult> {
  return runScript<PacedResult>(
    'bench/paced.ts',
    {
      port,
      path: statusPath(),
      headers: {
        authorization: `Bearer ${env.fx.userTokens[1] ?? env.fx.userToken}`,
        'x-forwarded-for': LEGIT_IP,
      },
      rate: FLOOD_RATE,
      durationSec: FLOOD_PHASE_SEC,
      warmupSec: PACED_WARMUP_SEC,
      connections: 16,
    },
    (FLOOD_PHASE_SEC + 70) * 1000,
  );
}

function floodSpec(port: number, extra: Record<string, unknown>): Record<string, unknown> {
  return {
    port,
    path: '/api/v1/exhausted',
    headers: { authorization: `Bearer ${env.fx.userToken}` },
    clients: 1,
    offset: FLOOD_CLIENT,
    connections: CONNECTIONS,
    depth: FLOOD_DEPTH,
    ...extra,
  };
}

/** The second client's run while the flood runs (started first, and still sending when the second client ends). */
async function duringFlood(server: Server): Promise<{ paced: PacedResult; flood: FloodResult['flood'] }> {
  let sending = (): void => {};
  const started = new Promise<void>((resolve) => (sending = resolve));
  const floodSec = FLOOD_LEAD_SEC + PACED_WARMUP_SEC + FLOOD_PHASE_SEC + FLOOD_SLACK_SEC;
  const floodRun = runScript<MillionOut>(
    'bench/million.ts',
    floodSpec(server.port, { durationSec: floodSec }),
    (floodSec + 60) * 1000,
    (line) => line === 'SENDING' && sending(),
  );
  let floodDone = false;
  void floodRun.then(
    () => (floodDone = true),
    () => (floodDone = true),
  );
  await Promise.race([started, floodRun]);
  await sleep(FLOOD_LEAD_SEC * 1000);
  const cpu0 = cpuMsOfTree(server.proc.pid);
  const t0 = performance.now();
  const paced = await secondClient(server.port);
  const systemCores = (cpuMsOfTree(server.proc.pid) - cpu0) / (performance.now() - t0);
  const coveredPacedRun = !floodDone;
  const f = await floodRun;
  return {
    paced,
    flood: {
      connections: CONNECTIONS,
      depth: FLOOD_DEPTH,
      requests: f.n,
      seconds: f.seconds,
      rps: f.rps,
      statuses: f.statuses,
      errors: f.errors,
      systemCores,
      coveredPacedRun,
    },
  };
}

/** One round: the second client alone and during the flood, in the order given. */
async function oneRound(key: FloodKey, server: Server, floodFirst: boolean): Promise<FloodRound> {
  const alone = async (): Promise<PacedResult> => {
    const p = await secondClient(server.port);
    expectStatus(`${LABELS[key]} flood, second client alone`, p.statuses, 200);
    process.stdout.write(` alone p99 ${fmtMs(p.p99)} ms`);
    return p;
  };
  const during = async (): Promise<Awaited<ReturnType<typeof duringFlood>>> => {
    const d = await duringFlood(server);
    expectStatus(`${LABELS[key]} flood, second client during the flood`, d.paced.statuses, 200);
    expectStatus(`${LABELS[key]} flood, the flood`, d.flood.statuses, 429);
    process.stdout.write(
      ` · flood p99 ${fmtMs(d.paced.p99)} ms (${fmtInt(d.flood.rps)} req/s${d.flood.coveredPacedRun ? '' : ', ended early'})`,
    );
    // The flood's connections close before the next phase.
    await sleep(500);
    return d;
  };
  const d = floodFirst ? await during() : undefined;
  const noFlood = await alone();
  const { paced, flood } = d ?? (await during());
  return { noFlood, duringFlood: paced, flood };
}

/**
 * The scenario for one system: warm-up (both paths), then ROUNDS rounds of the second client alone and
 * during the flood (which comes first alternates); each phase's figures from its round of lowest p99, as
 * for the fixed rate (other processes on the machine move them: the lowest is the nearest to the system's own).
 */
export async function benchFlood(key: FloodKey): Promise<void> {
  const r = (results[key] ??= { label: LABELS[key] });
  if (r.skipped !== undefined || unavailable(key) !== null) return;
  if (REDIS_SYSTEMS.has(key)) await env.redis!.flushall();
  const server = (await startSystem(key))!;
  try {
    process.stdout.write(`${LABELS[key].padEnd(28)} flood: warm-up`);
    // The JIT's tiers settle on both paths; the flood's bucket is exhausted from its first request on.
    const warm = { clients: 1, connections: 8, depth: 1, headers: { authorization: `Bearer ${env.fx.userToken}` } };
    await runScript('bench/million.ts', { ...warm, port: server.port, path: statusPath(), n: 5000 }, 60_000);
    await runScript('bench/million.ts', floodSpec(server.port, { n: 5000, connections: 8 }), 60_000);
    const rounds: FloodRound[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      process.stdout.write(`${round === 0 ? '' : `\n${''.padEnd(28)}`} [${round + 1}/${ROUNDS}]`);
      rounds.push(await oneRound(key, server, round % 2 === 1));
    }
    process.stdout.write('\n');
    const lowest = (f: (x: FloodRound) => number): FloodRound => rounds.reduce((a, x) => (f(x) < f(a) ? x : a));
    const alone = lowest((x) => x.noFlood.p99).noFlood;
    const best = lowest((x) => x.duringFlood.p99);
    r.flood = {
      rate: FLOOD_RATE,
      path: statusPath(),
      noFlood: alone,
      duringFlood: best.duringFlood,
      addedP99Ms: best.duringFlood.p99 - alone.p99,
      flood: best.flood,
      rounds,
    };
  } finally {
    await stopServer(server);
  }
}

/** The scenario's table, or null when it did not run. */
export function floodTable(): string | null {
  const keys = FLOOD_KEYS.filter((k) => results[k]?.flood !== undefined);
  if (keys.length === 0) return null;
  const ms = (x: number): string => fmtMs(x).padStart(7);
  const head1 = `${''.padEnd(28)} ${`alone (${FLOOD_RATE}/s)`.padEnd(26)}${'during the flood'.padEnd(26)}${'added'.padStart(7)}  flood (one IP, all 429)`;
  const head2 = `${'system'.padEnd(28)} ${'p50'.padStart(7)} ${'p99'.padStart(7)} ${'max'.padStart(7)}   ${'p50'.padStart(7)} ${'p99'.padStart(7)} ${'max'.padStart(7)}   ${'p99'.padStart(7)}  ${'req/s'.padStart(8)} ${'cores'.padStart(6)}`;
  const lines = [head1, head2, '-'.repeat(head2.length)];
  for (const k of keys) {
    const f = results[k]!.flood!;
    const [a, b] = [f.noFlood, f.duringFlood];
    const added = `${f.addedP99Ms >= 0 ? '+' : ''}${f.addedP99Ms.toFixed(1)}`;
    const early = f.flood.coveredPacedRun ? '' : '  (the flood ended before the second client did)';
    lines.push(
      `${LABELS[k].padEnd(28)} ${ms(a.p50)} ${ms(a.p99)} ${ms(a.max)}   ${ms(b.p50)} ${ms(b.p99)} ${ms(b.max)}   ${added.padStart(7)}  ` +
        `${fmtInt(f.flood.rps).padStart(8)} ${f.flood.systemCores.toFixed(2).padStart(6)}${early}`,
    );
  }
  lines.push(
    `(latencies in ms of the second client: its own IP and token, ${FLOOD_RATE} req/s open loop to the status path (200), ${FLOOD_PHASE_SEC} s each; ` +
      `added p99: during − alone; the flood: GET /api/v1/exhausted from one IP, ${CONNECTIONS} connections, one request in flight each; cores: the system's CPU seconds a second during the flood)`,
  );
  return lines.join('\n');
}

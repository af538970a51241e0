/**
 * @module `npm run bench`: the load benchmark of issue 6. Every server runs in its own process and the
 * load generator in another; all traffic stays on 127.0.0.1 and every run is bounded in time.
 *
 *   npm run bench [-- --quick] [-- --duration S] [-- --only thin,rategate-redis] [-- --skip mixed,million,profile]
 *
 * Systems: the built-in upstream reached directly, a thin forwarder (bench/thin-forwarder.ts), nginx with
 * limit_req (one worker, when installed), HAProxy with stick-table limits (one thread, when installed),
 * fastify + @fastify/rate-limit (Redis) + @fastify/reply-from (bench/fastify-stack.ts), rategate with the
 * memory store (access log off, and on at `info`) and with Redis. Scenarios: forwarded, fixed rate,
 * rejected, mixed seed traffic, the edge's protocols (HTTP/1.1 and HTTP/2, plain and TLS; TLS handshakes:
 * scenarios/edge.ts), memory per distinct client, N distinct clients (memory), a second client's latency
 * while one IP floods an exhausted bucket (scenarios/flood.ts), instructions
 * per request (callgrind, main thread, 3 fresh runs per system), CPU profiles of the gateway.
 * The runner: settings in lib/settings.ts, the processes in lib/systems.ts, one file per scenario in
 * scenarios/, the tables and goals in lib/report.ts.
 * Writes bench/results/latest.json, bench/results/latest.svg and bench/profile.md.
 * `--render bench/results/latest.json` only redraws the SVG from a results file.
 * `--replay [--lines N]` only measures `rategate replay` (bench/replay.ts).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { fixtures } from './lib/fixtures.js';
import { killAll } from './lib/procs.js';
import { chart, cpuTable, printSummary, ratios, renderOnly, table } from './lib/report.js';
import {
  argv,
  BENCH_CONFIG,
  CLIENTS,
  CONNECTIONS,
  DURATION,
  LABELS,
  note,
  notes,
  ONLY,
  ORDER,
  QUICK,
  RATE,
  RESULTS,
  results,
  ROUNDS,
  SEED_CONFIG,
  SKIP,
  WARMUP,
  want,
  type SystemKey,
} from './lib/settings.js';
import {
  build,
  env,
  launch,
  machine,
  startRedis,
  startUpstream,
  stopServer,
  unavailable,
  type Server,
} from './lib/systems.js';
import type { InstructionsResult, MemoryResult, PerClientResult } from './lib/types.js';
import { benchManyClients } from './scenarios/clients.js';
import {
  benchInstructions,
  callgrindAvailable,
  INSTR_LABELS,
  INSTR_ORDER,
  instrSystem,
  ownRow,
  type InstrKey,
} from './scenarios/instructions.js';
import { benchRound, pickBest, rounds } from './scenarios/load.js';
import { benchPerClient } from './scenarios/memory.js';
import { benchMillion } from './scenarios/million.js';
import { benchMixed } from './scenarios/mixed.js';
import { benchEdge, type EdgeResult } from './scenarios/edge.js';
import { benchFlood, FLOOD_KEYS, FLOOD_PHASE_SEC, FLOOD_RATE, floodTable } from './scenarios/flood.js';
import { profileGateway, writeProfiles } from './scenarios/profile.js';
import type { ProfileSummary } from './top-profile.js';

async function main(): Promise<void> {
  const t0 = Date.now();
  const m = machine();
  console.log(
    `rategate bench${QUICK ? ' (quick)' : ''}: ${m.cpu}, ${m.cores} cores, Node ${m.node}; ${ROUNDS} round(s) of ${DURATION} s runs after a warm-up, ${CONNECTIONS} connections, fixed rate ${RATE}/s`,
  );
  const load1 = (m.loadavgAtStart as number[])[0]!;
  if (load1 > 0.7)
    note(
      `load average ${load1} at start: other processes are using the CPU; figures are noisier than on an idle machine`,
    );
  // --cli: another build's dist/cli/index.js (a checkout of the code before a change, for an A/B).
  env.cli = argv.cli ?? build();
  mkdirSync(RESULTS, { recursive: true });

  let upstream: Server | null = null;
  let redisServer: Server | null = null;
  let memory: MemoryResult | null = null;
  let perClient: PerClientResult | null = null;
  const instructions: Partial<Record<InstrKey, InstructionsResult>> = {};
  const profiles: Partial<Record<'rategate-memory' | 'rategate-redis', ProfileSummary>> = {};
  let edge: EdgeResult | null = null;
  try {
    redisServer = await startRedis();
    if (redisServer) {
      env.redisUrl = `redis://127.0.0.1:${redisServer.port}`;
      env.redisPid = redisServer.proc.pid;
      env.redis = new Redis(env.redisUrl, { lazyConnect: false, maxRetriesPerRequest: 1 });
    } else note('no redis-server binary: Redis rows skipped');
    upstream = await startUpstream();
    env.upstreamUrl = `http://127.0.0.1:${upstream.port}`;
    env.upstreamPid = upstream.proc.pid;
    env.fx = await fixtures(QUICK ? 20 : 50);
    console.log(
      `upstream ${env.upstreamUrl}; target GET /api/v1/statuses/${env.fx.statusId} (a public status, 200, ~1.3 kB JSON) with a user's bearer token`,
    );

    // All systems up at once (idle ones cost nothing), then interleaved rounds, so that noise from
    // other processes on the machine spreads over all systems instead of hitting one.
    const up = new Map<SystemKey, Server | null>();
    try {
      for (const k of SKIP.has('load') ? [] : ORDER) {
        if (!want(k)) continue;
        const s = await launch(k);
        if (s !== 'skipped') up.set(k, s);
      }
      for (let round = 0; round < (SKIP.has('load') ? 0 : ROUNDS); round++) {
        const keys = [...up.keys()];
        if (round % 2 === 1) keys.reverse();
        for (const k of keys) {
          const server = up.get(k) ?? null;
          try {
            await benchRound(k, server?.port ?? upstream.port, round, server);
          } catch (err) {
            process.stdout.write('\n');
            const exit = server === null ? null : (server.proc.child.exitCode ?? server.proc.child.signalCode);
            note(
              `${LABELS[k]}, round ${round + 1}: ${(err as Error).message.slice(0, 200)}` +
                (exit !== null && exit !== undefined
                  ? ` — the server process had exited (${exit}); its last output: ${JSON.stringify(server!.proc.output().slice(-400))}`
                  : ''),
            );
          }
        }
      }
    } finally {
      for (const s of up.values()) await stopServer(s);
    }
    pickBest();
    if (!SKIP.has('mixed')) {
      for (const k of ['direct', 'thin', 'rategate-memory', 'rategate-redis'] as const)
        if (want(k)) await benchMixed(k, upstream.port);
    }
    if (!SKIP.has('edge') && want('rategate-memory')) edge = await benchEdge();
    if (!SKIP.has('memory') && want('rategate-memory')) perClient = await benchPerClient();
    if (!SKIP.has('million') && want('rategate-memory')) memory = await benchMillion();
    if (!SKIP.has('clients'))
      for (const k of ['thin', 'rategate-memory', 'rategate-redis'] as const) if (want(k)) await benchManyClients(k);
    if (!SKIP.has('flood'))
      for (const k of FLOOD_KEYS) {
        if (!want(k)) continue;
        try {
          await benchFlood(k);
        } catch (err) {
          process.stdout.write('\n');
          note(`flood, ${LABELS[k]}: ${(err as Error).message.slice(0, 300)}`);
        }
      }
    if (!SKIP.has('instructions')) {
      if (!callgrindAvailable())
        note('instructions per request skipped: valgrind (callgrind) is not installed (apt-get install -y valgrind)');
      else {
        for (const k of INSTR_ORDER) {
          // `rategate-redis-clients` comes with `rategate-redis`, or alone when --only names it.
          // The bare forwarder's variants (a dispatch handler as rategate's, then rategate's headers too: their floor) come with `thin`;
          // the refused rows (`-429`, the 429 floor) and the traced one run in a full run or when --only names them.
          const system = instrSystem(k);
          const wanted = ONLY?.has(k) === true || (ownRow(k) ? ONLY === null : want(system));
          if (unavailable(system) !== null || !wanted) continue;
          try {
            instructions[k] = await benchInstructions(k);
          } catch (err) {
            process.stdout.write('\n');
            note(`instructions per request, ${INSTR_LABELS[k]}: ${(err as Error).message.slice(0, 300)}`);
          }
        }
      }
    } else if (QUICK)
      note(
        'instructions per request skipped (--quick skips them: callgrind takes minutes per run; add --instructions)',
      );
    if (!SKIP.has('profile')) {
      for (const k of ['rategate-memory', 'rategate-redis'] as const) {
        if (!want(k) || unavailable(k) !== null) continue;
        const s = await profileGateway(k);
        if (s) profiles[k] = s;
      }
    } else note('CPU profiles skipped (--skip profile; --quick skips them)');
  } finally {
    await stopServer(upstream);
    env.redis?.disconnect();
    await stopServer(redisServer);
  }

  m.loadavgAtEnd = os.loadavg().map((x) => +x.toFixed(2));
  const rs = ratios(perClient);
  console.log(`\n${table()}\n`);
  console.log(`${cpuTable()}\n`);
  const flood = floodTable();
  if (flood !== null) console.log(`${flood}\n`);
  printSummary(rs, instructions, perClient, memory);

  if (Object.keys(profiles).length > 0) writeProfiles(profiles, m);

  const json = {
    generatedAt: new Date().toISOString(),
    quick: QUICK,
    machine: m,
    settings: {
      durationSec: DURATION,
      warmupSec: WARMUP,
      rounds: ROUNDS,
      pick: 'each figure from its best round (highest req/s; for the fixed rate, lowest p99); every round is in `rounds`',
      connections: CONNECTIONS,
      fixedRate: RATE,
      clients: CLIENTS,
      loadGenerator:
        'autocannon 8 (programmatic, child process) for fixed concurrency; bench/paced.ts (open-loop, raw sockets) for the fixed rate; bench/million.ts (raw sockets, pipelined) for distinct clients',
      target: 'GET /api/v1/statuses/:id of a public status (200, ~1.3 kB JSON), Authorization: Bearer <user token>',
      rejectedTarget: 'GET /api/v1/exhausted: limit 1 per hour per IP (nginx: 1r/m), exhausted during the warm-up',
      rategateConfig: BENCH_CONFIG,
      mixedConfig: SEED_CONFIG,
      flood: `scenario flood: a second client (its own IP and token) at ${FLOOD_RATE} req/s open loop (bench/paced.ts) to the status path, ${FLOOD_PHASE_SEC} s alone, then ${FLOOD_PHASE_SEC} s while one IP sends GET /api/v1/exhausted (all 429) on ${CONNECTIONS} connections, one request in flight each (bench/million.ts); systems.<key>.flood`,
    },
    systems: results,
    rounds,
    memory,
    memoryPerClient: perClient,
    edge,
    instructions,
    ratios: rs,
    profiles,
    notes,
    elapsedSec: Math.round((Date.now() - t0) / 1000),
  };
  const outName = ONLY !== null ? 'partial' : QUICK ? 'quick' : 'latest';
  writeFileSync(path.join(RESULTS, `${outName}.json`), `${JSON.stringify(json, null, 2)}\n`);
  writeFileSync(
    path.join(RESULTS, `${outName}.svg`),
    chart({ systems: results, connections: CONNECTIONS, rate: RATE, machine: m, memory, date: json.generatedAt }),
  );
  console.log(
    `\nwrote ${RESULTS}/${outName}.json and ${outName}.svg${Object.keys(profiles).length ? ' and bench/profile.md' : ''} in ${json.elapsedSec} s`,
  );
  if (notes.length) console.log(`notes:\n${notes.map((n) => `  - ${n}`).join('\n')}`);
}

process.on('SIGINT', () => {
  killAll();
  process.exit(130);
});
process.on('exit', killAll);
if (argv.replay === true) {
  await (await import('./replay.js')).benchReplay(Number(argv.lines ?? 1_200_000));
  process.exit(0);
}
if (argv.render !== undefined) {
  renderOnly(argv.render);
  process.exit(0);
}
main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    killAll();
    process.exit(1);
  },
);

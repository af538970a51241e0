/**
 * @module CPU µs per 429 of the answering process (user + kernel, /proc), natively: the 429 floor
 * (bench/thin-forwarder.ts --reject), rategate (memory and Redis; one build or two with `--cli`), and
 * fastify + @fastify/rate-limit (Redis, and its own memory store), each sent the same refused requests
 * (`GET /api/v1/exhausted` with a user token, one client, 8 keep-alive connections; rategate Redis also
 * from 1000 clients by X-Forwarded-For, each exhausted in the warm-up), in interleaved
 * rounds so that other processes' load spreads over all. Noisy on a shared machine: the instruction
 * counts (`npm run bench -- --instructions`) are the figure to decide on. Two builds in one run (`--cli
 * A,B`) are not comparable: the same build given twice measured its second set of gateways 3–6 µs
 * higher per 429 on this 2-core machine (2026-12-02), whichever build came second. Compare builds in
 * runs of their own, alternated (A, B, A, B).
 *
 *   npx tsx bench/refusal-cpu.ts [--requests 20000] [--rounds 3] [--procs 3] [--pin] [--cli dist/cli/index.js,bench/.build/before/dist/cli/index.js]
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { fixtures } from './lib/fixtures.js';
import { cpuMsByThread, cpuMsOfTree, killAll, pidsOfTree, runScript } from './lib/procs.js';
import {
  build,
  env,
  startFastify,
  startGateway,
  startRedis,
  startThin,
  startUpstream,
  stopServer,
  type Server,
} from './lib/systems.js';
import { argv, BENCH_CONFIG } from './lib/settings.js';

// The bench's command line (lib/settings.ts): --requests, --rounds, --cli.
const N = Number(argv.requests ?? 20_000);
const ROUNDS = Number(argv.rounds ?? 3);
/** The Redis row with many clients: every 429 is one of MANY exhausted clients' (X-Forwarded-For), each in the blocked cache. */
const MANY = 1000;
const MANY_NAME = `rategate Redis, ${MANY} clients`;
const clientsOf = (name: string): number => (name.startsWith(MANY_NAME) ? MANY : 1);

/** Sends `n` refused requests; the answering process's CPU ms over them and how many were 429. */
async function measure(
  s: Server,
  n: number,
  clients = 1,
): Promise<{ cpuMs: number; refused: number; threads: Map<string, number> }> {
  const spec = {
    port: s.port,
    path: '/api/v1/exhausted',
    headers: { authorization: `Bearer ${env.fx.userToken}` },
    n,
    clients,
    connections: 8,
    depth: 1,
  };
  const before = cpuMsOfTree(s.proc.pid);
  const threadsBefore = cpuMsByThread(s.proc.pid);
  const r = await runScript<{ statuses: Record<string, number> }>('bench/million.ts', spec, 10 * 60_000);
  const cpuMs = cpuMsOfTree(s.proc.pid) - before;
  const threads = new Map([...cpuMsByThread(s.proc.pid)].map(([t, ms]) => [t, ms - (threadsBefore.get(t) ?? 0)]));
  return { cpuMs, refused: r.statuses['429'] ?? 0, threads };
}

/**
 * The bench table with a key prefix of its own per gateway: with several builds on one Redis, each
 * exhausts its own buckets (a gateway meeting buckets another exhausted refuses by the early read, a
 * path of its own, and would be measured on that instead).
 */
function ownKeys(name: string): string {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'rategate-refusal-')), 'limits.yaml');
  writeFileSync(file, `${readFileSync(BENCH_CONFIG, 'utf8')}\nstore:\n  prefix: ${name}\n`);
  return file;
}

/**
 * `--pin`: the answering processes on CPU 0 and all else on CPU 1 (set on this process first, so that
 * every child inherits it): where the scheduler puts a server beside its load generator otherwise moved
 * one build's figure by up to half between two processes of the same program (2026-12-04).
 */
const PIN = argv.pin === true;
/**
 * `--procs P`: P processes of each system, each measured every round; a figure is the median of all
 * their rounds. Two processes of one program, same build, same rounds, differed by 20–45 % (2026-12-04:
 * the floor 16.0 against 23.3 µs, and pinned 21.8 against 17.0), so one process per row cannot carry a ratio.
 */
const PROCS = Number(argv.procs ?? 1);
function pinTo(cpu: number, pid: number): void {
  const r = spawnSync('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`taskset: ${r.stderr || r.error?.message}`);
}

async function main(): Promise<void> {
  if (PIN) pinTo(1, process.pid);
  const clis = argv.cli !== undefined ? argv.cli.split(',') : [build()];
  env.cli = clis[0]!;
  const redisServer = await startRedis();
  env.redisUrl = `redis://127.0.0.1:${redisServer!.port}`;
  env.redis = new Redis(env.redisUrl);
  const upstream = await startUpstream();
  env.upstreamUrl = `http://127.0.0.1:${upstream.port}`;
  env.fx = await fixtures(5);
  const systems: Array<[string, Server]> = [];
  // Each set of processes in start order, floor first; every process has key prefixes of its own.
  for (let p = 0; p < PROCS; p++) {
    systems.push(['floor-429', await startThin([], [], ['--reject'])]);
    for (const [i, cli] of clis.entries()) {
      env.cli = cli;
      const tag = clis.length > 1 ? ` (${cli})` : '';
      systems.push([`rategate memory${tag}`, await startGateway('rategate-memory', BENCH_CONFIG, 'memory')]);
      const hot = ownKeys(`rg-hot-${i}-${p}`);
      const many = ownKeys(`rg-many-${i}-${p}`);
      systems.push([`rategate Redis${tag}`, await startGateway('rategate-redis', hot, env.redisUrl)]);
      systems.push([`${MANY_NAME}${tag}`, await startGateway('rategate-redis', many, env.redisUrl)]);
    }
    systems.push(['fastify (Redis)', await startFastify()], ['fastify (memory)', await startFastify([], [], 'memory')]);
  }
  if (PIN) for (const [, s] of systems) for (const pid of pidsOfTree(s.proc.pid)) pinTo(0, pid);
  const us = new Map<string, number[]>();
  /** Per system: each process's rounds, in start order. */
  const byProcess = new Map<string, Map<Server, number[]>>();
  /** Per system, per thread name: µs per 429 of each round (the main thread's share against V8's and libuv's). */
  const threads = new Map<string, Map<string, number[]>>();
  try {
    // Warm-up: exhausts the bucket (the many-clients row's first request of each client passes: the
    // exhausted rule allows one), then as many refusals as a round, so that V8's tiers have settled on
    // the 429 path before the first count (natively, TurboFan is still at work ~4000 requests in).
    for (const [name, s] of systems) await measure(s, 3 * MANY, clientsOf(name));
    for (const [name, s] of systems) await measure(s, N, clientsOf(name));
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? systems : [...systems].reverse();
      for (const [name, s] of order) {
        const m = await measure(s, N, clientsOf(name));
        if (m.refused < N * 0.99) throw new Error(`${name}: ${m.refused} of ${N} refused`);
        (us.get(name) ?? us.set(name, []).get(name)!).push((m.cpuMs * 1000) / N);
        const procs = byProcess.get(name) ?? byProcess.set(name, new Map()).get(name)!;
        (procs.get(s) ?? procs.set(s, []).get(s)!).push((m.cpuMs * 1000) / N);
        const perThread = threads.get(name) ?? threads.set(name, new Map()).get(name)!;
        for (const [t, ms] of m.threads) (perThread.get(t) ?? perThread.set(t, []).get(t)!).push((ms * 1000) / N);
      }
    }
  } finally {
    for (const [, s] of systems) await stopServer(s);
    await stopServer(upstream);
    env.redis.disconnect();
    await stopServer(redisServer);
    killAll();
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  const floor = median(us.get('floor-429')!);
  const samples = `${ROUNDS} rounds${PROCS > 1 ? ` × ${PROCS} processes` : ''}${PIN ? ', pinned' : ''}`;
  console.log(
    `| system | CPU µs per 429 (median of ${samples}) | × floor-429 | each process's rounds |\n|---|--:|--:|---|`,
  );
  for (const [name, xs] of us) {
    const procs = [...byProcess.get(name)!.values()].map((r) => r.map((x) => x.toFixed(1)).join(', '));
    console.log(`| ${name} | ${median(xs).toFixed(1)} | ${(median(xs) / floor).toFixed(2)} | ${procs.join(' / ')} |`);
  }
  console.log(`\n| system | CPU µs per 429 by thread (median of ${samples}; 10 ms ticks) |\n|---|---|`);
  for (const [name, byThread] of threads) {
    const parts = [...byThread].map(([t, xs]) => [t, median(xs)] as const).filter(([, x]) => x > 0);
    console.log(`| ${name} | ${parts.map(([t, x]) => `${t} ${x.toFixed(1)}`).join(', ')} |`);
  }
}

await main();

/**
 * @module Scenario `instructions`: main-thread instructions per forwarded request of each system under
 * callgrind, the figure a shared machine cannot move (perf has no hardware counters in this VM).
 *
 * One run is one fresh process under `valgrind --tool=callgrind --instr-atstart=no`: start-up and
 * `WARMUP` requests run uninstrumented, then instrumentation goes on (`callgrind_control -i on`) for an
 * idle window (the timers' own work: instructions per second with no request); `REWARM` more requests,
 * uninstrumented again, let V8's tiers settle (`optimizing`, TurboFan's jobs on the worker threads in the
 * window, shows whether they did); then a measured window of `WINDOW` requests, long enough for several
 * scavenges. Each window is
 * one dump (`-z` before, `-d` after), one file per thread (`--separate-threads=yes`; `-01` is the main
 * thread). A run's figure is the main thread's count less its timer work, per request (lib/callgrind.ts
 * runFigures: the window's JS timers from the call graph, plus the idle window's other work per second ×
 * the window's seconds); V8's garbage collector and compilers on the main thread are reported apart.
 * (`--toggle-collect=node::Environment::RunTimers` would leave timers out at the source, but callgrind
 * does not see every return out of V8's frames: collection stays toggled and nothing is counted.)
 * Node runs with `--perf-basic-prof`, so the dumps can name JIT-compiled JavaScript
 * (`npx tsx bench/callgrind-top.ts DIR`). Dumps stay in `bench/.build/callgrind/<system>/run<N>/` (`--instr-dir` another folder).
 * Valgrind's default `--smc-check=all-non-file` already sees V8 rewriting its code (anonymous mappings).
 */
import { spawnSync } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { runFigures } from '../lib/callgrind.js';
import { redisCalls } from '../lib/measure.js';
import { runScript, sleep } from '../lib/procs.js';
import { BENCH_CONFIG, INSTR_DIR, INSTR_RUNS, QUICK, type SystemKey } from '../lib/settings.js';
import { env, startFastify, startGateway, startThin, stopServer, type Server } from '../lib/systems.js';
import type { InstructionsResult, InstructionsRun } from '../lib/types.js';

/** Distinct clients of `rategate-redis-429-clients`, all exhausted within the warm-up: each request is a known client's 429. */
const REFUSED_CLIENTS = 1000;

/**
 * The systems measured: the hot-key ones of the load scenario, and the Redis gateway with a new client
 * per request; then the refused request (`-429`: every measured request a 429 on the exhausted path)
 * against its floor, a bare node:http server writing the same 429 with no limiting.
 */
export type InstrKey =
  | 'thin'
  | 'thin-dispatch'
  | 'thin-headers'
  | 'rategate-memory'
  | 'rategate-memory-traced'
  | 'rategate-memory-log'
  | 'rategate-redis'
  | 'rategate-redis-clients'
  | 'fastify'
  | 'floor-429'
  | 'rategate-memory-429'
  | 'rategate-redis-429'
  | 'rategate-redis-429-clients'
  | 'fastify-429'
  | 'fastify-memory-429';
export const INSTR_ORDER: readonly InstrKey[] = [
  'thin',
  'thin-dispatch',
  'thin-headers',
  'rategate-memory',
  'rategate-memory-traced',
  'rategate-memory-log',
  'rategate-redis',
  'rategate-redis-clients',
  'fastify',
  'floor-429',
  'rategate-memory-429',
  'rategate-redis-429',
  'rategate-redis-429-clients',
  'fastify-429',
  'fastify-memory-429',
];
export const INSTR_LABELS: Record<InstrKey, string> = {
  thin: 'bare Node forwarder',
  'thin-dispatch': 'bare, dispatch handler',
  'thin-headers': "bare, dispatch handler + rategate's headers",
  'rategate-memory': 'rategate memory',
  'rategate-memory-traced': 'rategate memory, traces 1 % sampled',
  'rategate-memory-log': 'rategate memory, access log on',
  'rategate-redis': 'rategate Redis, hot key',
  'rategate-redis-clients': 'rategate Redis, many clients',
  fastify: 'fastify+rate-limit (Redis)',
  'floor-429': "429 floor: node:http, rategate's 429",
  'rategate-memory-429': 'rategate memory, 429',
  'rategate-redis-429': 'rategate Redis, 429 hot key',
  'rategate-redis-429-clients': `rategate Redis, 429, ${REFUSED_CLIENTS} clients`,
  'fastify-429': 'fastify+rate-limit (Redis), 429',
  'fastify-memory-429': 'fastify+rate-limit (memory), 429',
};

/** A row of refused requests: every measured request is answered 429 (the exhausted path). */
export const refusedRow = (key: InstrKey): boolean => key.endsWith('-429') || key === 'rategate-redis-429-clients';

/** Rows run in a full run or when --only names them, not with their system alone: the refused rows and the traced one. */
export const ownRow = (key: InstrKey): boolean => refusedRow(key) || key === 'rategate-memory-traced';

/** The load scenario's system a row comes with (`--only`), and whose availability it shares. */
export function instrSystem(key: InstrKey): SystemKey {
  switch (key) {
    case 'thin-dispatch':
    case 'thin-headers':
    case 'floor-429':
      return 'thin';
    case 'rategate-redis-clients':
    case 'rategate-redis-429':
    case 'rategate-redis-429-clients':
      return 'rategate-redis';
    case 'rategate-memory-429':
    case 'rategate-memory-traced':
      return 'rategate-memory';
    case 'fastify-429':
    case 'fastify-memory-429':
      return 'fastify';
    case 'thin':
    case 'rategate-memory':
    case 'rategate-memory-log':
    case 'rategate-redis':
    case 'fastify':
      return key;
  }
}

/** Uninstrumented requests before the idle window: the JIT tiers the first few thousand up. */
export const WARMUP = 3000;
/** Measured requests per run: several scavenges' worth of allocation. */
export const WINDOW = QUICK ? 1500 : 3000;
const IDLE_MS = 5000;
/** From the warm-up's end to the idle window: longer than every keep-alive timeout on the way. */
const SETTLE_MS = 8000;
/**
 * Requests between the idle window and the measured one, uncounted and uninstrumented. The new
 * connections deoptimize what the warm-up optimized without them, and TurboFan is still tiering the
 * 429 path up: the rows' windows of 3000 after 200 such requests held 60–120k instructions per request
 * of optimizing jobs on the worker threads and the gateway's stages in baseline code (2026-12-04). Natively,
 * the opt/deopt trace goes quiet ~4000 requests after the idle window.
 */
const REWARM = 5000;
/** Distinct clients of `rategate-redis-clients`: every request of a run comes from one not seen before. */
const MANY = 100_000;

/** valgrind is installed (perf cannot count here: callgrind is the only counter). */
export function callgrindAvailable(): boolean {
  return !spawnSync('valgrind', ['--version']).error && !spawnSync('callgrind_control', ['-h']).error;
}

async function startUnder(key: InstrKey, wrap: string[], dir: string): Promise<Server> {
  // The perf map names JIT code in the dumps; V8 then also logs its memory chunks, into the run's directory.
  const nodeFlags = ['--perf-basic-prof', '--no-logfile-per-isolate', `--logfile=${path.join(dir, 'v8.log')}`];
  if (key === 'thin') return startThin(wrap, nodeFlags);
  if (key === 'thin-dispatch') return startThin(wrap, nodeFlags, ['--dispatch']);
  if (key === 'thin-headers') return startThin(wrap, nodeFlags, ['--dispatch', '--gateway-headers']);
  if (key === 'floor-429') return startThin(wrap, nodeFlags, ['--reject']);
  if (key === 'fastify' || key === 'fastify-429') return startFastify(wrap, nodeFlags);
  if (key === 'fastify-memory-429') return startFastify(wrap, nodeFlags, 'memory');
  const memory =
    key === 'rategate-memory' ||
    key === 'rategate-memory-log' ||
    key === 'rategate-memory-429' ||
    key === 'rategate-memory-traced';
  const store = memory ? 'memory' : env.redisUrl!;
  // The bench table with a store timeout fit for valgrind: 50 ms of native time is seconds under it,
  // and a timed-out call would send the count down the fault policy's path instead of the normal one.
  const config = path.join(dir, 'limits.yaml');
  writeFileSync(config, `${readFileSync(BENCH_CONFIG, 'utf8')}\nstore:\n  timeout: 10s\n`);
  // `-log`: the access log on (info, to a file), the rest as the quiet row: their difference is the log's cost.
  if (key !== 'rategate-memory-traced')
    return startGateway(key, config, store, { wrap, nodeFlags, accessLog: key === 'rategate-memory-log' });
  // Traces on, 1 % of requests sampled (the client sends no traceparent: each is a root), exported over
  // OTLP/HTTP protobuf to a receiver in this process that answers 200 and keeps nothing.
  const sink = await startTraceSink();
  const server = await startGateway(key, config, store, {
    wrap,
    nodeFlags,
    startMs: 900_000,
    env: {
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://127.0.0.1:${sink.port}/v1/traces`,
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.01',
    },
  });
  const cleanup = server.cleanup;
  return { ...server, cleanup: () => (cleanup?.(), sink.server.close()) };
}

/** An OTLP/HTTP receiver that takes every export and keeps nothing. */
async function startTraceSink(): Promise<{ server: http.Server; port: number }> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

/**
 * Sends `n` requests (8 keep-alive connections, one in flight each) from the client(s) starting at
 * `offset`; how many were not answered as the row expects (200, or 429 on a refused row).
 */
async function send(key: InstrKey, port: number, n: number, offset: number, strict = true): Promise<number> {
  const many = key === 'rategate-redis-clients';
  const refused = refusedRow(key);
  const expected = refused ? '429' : '200';
  const r = await runScript<{ n: number; statuses: Record<string, number> }>(
    'bench/million.ts',
    {
      port,
      path: refused ? '/api/v1/exhausted' : `/api/v1/statuses/${env.fx.statusId}`,
      headers: { authorization: `Bearer ${env.fx.userToken}` },
      n,
      clients: many ? MANY : key === 'rategate-redis-429-clients' ? REFUSED_CLIENTS : 1,
      offset: many ? offset : 0,
      connections: 8,
      depth: 1,
    },
    30 * 60_000,
  );
  // A forwarder without retries answers an odd 502 when the upstream closes a kept-alive connection as a
  // request goes out (valgrind's slowness widens that race): a few are no reason to lose the run.
  if (strict && (r.statuses[expected] ?? 0) < n * 0.99)
    throw new Error(`expected ${n} answers ${expected}, got ${JSON.stringify(r.statuses)}`);
  return n - (r.statuses[expected] ?? 0);
}

const usesRedis = (key: InstrKey): boolean =>
  !key.startsWith('thin') &&
  key !== 'floor-429' &&
  key !== 'rategate-memory' &&
  key !== 'rategate-memory-log' &&
  key !== 'rategate-memory-429' &&
  key !== 'rategate-memory-traced' &&
  key !== 'fastify-memory-429';

/** One run: a fresh process, warm-up, idle window, measured window. */
async function oneRun(key: InstrKey, dir: string): Promise<InstructionsRun> {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  if (usesRedis(key)) await env.redis!.flushall();
  const wrap = [
    'valgrind',
    '--tool=callgrind',
    '--instr-atstart=no',
    '--separate-threads=yes',
    `--callgrind-out-file=${path.join(dir, 'callgrind.out.%p')}`,
  ];
  const server = await startUnder(key, wrap, dir);
  const pid = server.proc.pid;
  let dumps = 0;
  const control = (...args: string[]): void => {
    const r = spawnSync('callgrind_control', [...args, String(pid)], { encoding: 'utf8', timeout: 120_000 });
    if (r.status !== 0) throw new Error(`callgrind_control ${args.join(' ')}: ${r.stderr || r.stdout}`);
  };
  /** Dumps now (one file per thread, `callgrind.out.PID.N-TT`) and waits for the main thread's file. */
  const dump = async (): Promise<void> => {
    control('-d');
    const main = path.join(dir, `callgrind.out.${pid}.${++dumps}-01`);
    const until = Date.now() + 60_000;
    while (!existsSync(main) && Date.now() < until) await sleep(100);
    await sleep(500);
  };
  try {
    // The many-clients 429 row: each client's first request passes (the exhausted rule allows one) and
    // its 404 is the upstream's, so the warm-up, which exhausts them, is not held to 429s.
    await send(key, server.port, WARMUP, 0, key !== 'rategate-redis-429-clients');
    // The warm-up's connections close as it ends, and the pools' idle ones to the upstream on their
    // keep-alive timeouts (4–5 s): their teardown is not timer work, so the idle window starts after.
    await sleep(SETTLE_MS);
    control('-i', 'on');
    control('-z');
    const i0 = performance.now();
    await sleep(IDLE_MS);
    await dump();
    const idleSeconds = (performance.now() - i0) / 1000;
    // The upstream has closed the connections idle through that window (its keep-alive timeout, 5 s,
    // runs at native speed, the system's own timers ~50× slower): a few requests open fresh ones (and
    // take the leases again) before the count starts, so the window sees no reset connection.
    control('-i', 'off');
    await send(key, server.port, REWARM, WARMUP + WINDOW, false);
    control('-i', 'on');
    const redisBefore = usesRedis(key) ? await redisCalls() : null;
    control('-z');
    const w0 = performance.now();
    const failed = await send(key, server.port, WINDOW, WARMUP);
    const seconds = (performance.now() - w0) / 1000;
    await dump();
    const redisAfter = redisBefore === null ? null : await redisCalls();
    const perfMap = `/tmp/perf-${pid}.map`;
    if (existsSync(perfMap)) copyFileSync(perfMap, path.join(dir, 'perf.map'));
    // What the dumps' counts are divided by (runFigures, bench/callgrind-top.ts).
    writeFileSync(
      path.join(dir, 'run.json'),
      `${JSON.stringify({ system: key, pid, idleSeconds, requests: WINDOW, seconds })}\n`,
    );
    return {
      ...runFigures(dir),
      ...(failed > 0 ? { non200: failed } : {}),
      ...(redisBefore !== null && redisAfter !== null
        ? { redisScriptCalls: (redisAfter.scripts - redisBefore.scripts) / WINDOW }
        : {}),
    };
  } finally {
    await stopServer(server);
    rmSync(`/tmp/perf-${pid}.map`, { force: true });
  }
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** `INSTR_RUNS` runs of one system, each in a fresh process; the medians and the spread of the main-thread figure. */
export async function benchInstructions(key: InstrKey): Promise<InstructionsResult> {
  const runs: InstructionsRun[] = [];
  for (let i = 0; i < INSTR_RUNS; i++) {
    process.stdout.write(`${INSTR_LABELS[key].padEnd(30)} callgrind run ${i + 1}/${INSTR_RUNS} … `);
    const r = await oneRun(key, path.resolve(INSTR_DIR, key, `run${i + 1}`));
    runs.push(r);
    const k = (x: number): string => `${(x / 1000).toFixed(1)}k`;
    process.stdout.write(
      `main thread ${k(r.main)} per request (GC ${k(r.gc)} in ${r.gcEntries} entries, compile ${k(r.compile)}, timers ${k(r.timers)} subtracted: idle ${k(r.idlePerSecond)}/s), ` +
        `all threads ${k(r.allThreads)} (optimizing ${k(r.optimizing ?? 0)})${r.redisScriptCalls === undefined ? '' : `, ${r.redisScriptCalls.toFixed(3)} script calls`}; ${r.seconds.toFixed(0)} s\n`,
    );
  }
  const mains = runs.map((r) => r.main);
  const main = median(mains);
  return {
    tool: 'callgrind',
    warmup: WARMUP,
    rewarm: REWARM,
    runs,
    main,
    steady: median(runs.map((r) => r.main - r.gc - r.compile)),
    spread: (Math.max(...mains) - Math.min(...mains)) / main,
  };
}

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
 * rejected, mixed seed traffic, memory per distinct client, N distinct clients (memory), instructions
 * per request (perf stat, else callgrind), CPU profiles of the gateway.
 * Writes bench/results/latest.json, bench/results/latest.svg and bench/profile.md.
 * `--render bench/results/latest.json` only redraws the SVG from a results file.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { renderChart, type Panel } from './lib/chart.js';
import { cpuMsOfTree, freePort, killAll, rssOf, runScript, sleep, start, waitForPort, type Proc } from './lib/procs.js';
import { summarize, toMarkdown, type ProfileSummary } from './top-profile.js';
import type { LoadSpec, MixSpec } from './load.js';

// ---------------------------------------------------------------- settings

const { values: argv } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    duration: { type: 'string' },
    connections: { type: 'string' },
    rate: { type: 'string' },
    clients: { type: 'string' },
    rounds: { type: 'string' },
    render: { type: 'string' },
    only: { type: 'string' },
    skip: { type: 'string' },
    instructions: { type: 'boolean', default: false },
  },
  strict: true,
});
const QUICK = argv.quick === true;
const DURATION = Number(argv.duration ?? (QUICK ? 2 : 5));
/** Rounds over all systems (interleaved); each figure is the best round's, which damps noise from other processes. */
const ROUNDS = Number(argv.rounds ?? (QUICK ? 1 : 2));
const WARMUP = QUICK ? 1 : 2;
const CONNECTIONS = Number(argv.connections ?? 32);
const RATE = Number(argv.rate ?? 2000);
const CLIENTS = Number(argv.clients ?? (QUICK ? 100_000 : 1_000_000));
const PROFILE_SEC = QUICK ? 3 : 8;
const ONLY = argv.only ? new Set(argv.only.split(',')) : null;
const SKIP = new Set((argv.skip ?? (QUICK ? 'profile,instructions' : '')).split(',').filter(Boolean));
if (argv.instructions === true) SKIP.delete('instructions');

const BUILD = path.join('bench', '.build', 'dist');
const RESULTS = path.join('bench', 'results');
const BENCH_CONFIG = 'bench/limits.bench.yaml';
const PROFILE_MARKER = '<!-- hand-written from here on: kept when the bench rewrites the profiles above -->';
const SEED_CONFIG = 'config/limits.yaml';

type SystemKey = 'direct' | 'thin' | 'nginx' | 'haproxy' | 'fastify' | 'rategate-memory' | 'rategate-memory-log' | 'rategate-memory-deferred' | 'rategate-redis' | 'rategate-redis-unix';
const LABELS: Record<SystemKey, string> = {
  direct: 'upstream (direct)',
  thin: 'thin forwarder',
  nginx: 'nginx limit_req (1 worker)',
  haproxy: 'HAProxy stick-table (1 thr)',
  fastify: 'fastify+rate-limit (Redis)',
  'rategate-memory': 'rategate memory',
  'rategate-memory-log': 'rategate memory, access log',
  'rategate-memory-deferred': 'rategate memory, deferred',
  'rategate-redis': 'rategate Redis',
  'rategate-redis-unix': 'rategate Redis, Unix socket',
};
const ORDER: SystemKey[] = ['direct', 'thin', 'nginx', 'haproxy', 'fastify', 'rategate-memory', 'rategate-memory-log', 'rategate-memory-deferred', 'rategate-redis', 'rategate-redis-unix'];
/** Diagnostic systems: run only when named in --only. */
const DIAGNOSTIC = new Set<SystemKey>(['rategate-memory-deferred', 'rategate-redis-unix']);
/** Systems whose requests reach Redis (their CPU table has a redis column). */
const REDIS_SYSTEMS = new Set<SystemKey>(['fastify', 'rategate-redis', 'rategate-redis-unix']);
/** Debian installs haproxy in /usr/sbin, which is not on every user's PATH. */
const HAPROXY = ['haproxy', '/usr/sbin/haproxy', '/usr/local/sbin/haproxy'].find((c) => !spawnSync(c, ['-v']).error) ?? null;

interface LoadResult {
  requests: number;
  rps: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  statuses: Record<string, number>;
  errors: number;
  timeouts: number;
  /** Redis commands per request during the measured phase, including those run inside Lua scripts (Redis-backed systems). */
  redisCallsPerRequest?: number;
  /** Script calls (EVAL/EVALSHA/FCALL) per request: client round trips to Redis. */
  redisScriptCallsPerRequest?: number;
  /** CPU time per request (µs) of each process during the measured phase (forwarded scenario). */
  cpuUsPerRequest?: CpuPerRequest;
  /** The load generator's own CPU time in the measured phase (load.ts reports it). */
  loadGeneratorCpuMs?: number;
}
interface CpuPerRequest {
  /** The system under test (null for the upstream reached directly: it is the upstream). */
  system: number | null;
  /** Of `system`: user-space and kernel (system calls: sockets) time. */
  systemUser?: number | null;
  systemKernel?: number | null;
  upstream: number;
  redis: number | null;
  loadGenerator: number;
  total: number;
}
/** Processes whose CPU time a load run accounts for. */
interface CpuPids {
  system: number | null;
  upstream: number;
  redis: number | null;
}
interface PacedResult {
  sent: number;
  completed: number;
  achievedRate: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  statuses: Record<string, number>;
  errors: number;
}
interface SystemResult {
  label: string;
  skipped?: string;
  forwarded?: LoadResult;
  fixedRate?: PacedResult;
  rejected?: LoadResult;
  mixed?: LoadResult;
  mixedSkipped?: string;
  /** The many-client scenario (bench/million.ts): MANY_CLIENTS distinct clients, a few requests each. */
  manyClients?: ManyClientsResult;
}
interface ManyClientsResult {
  clients: number;
  requests: number;
  rps: number;
  statuses: Record<string, number>;
  /** CPU µs per request of the system under test and of redis-server (null: not a Redis system). */
  cpuUsSystem: number;
  cpuUsRedis: number | null;
}

const results: Partial<Record<SystemKey, SystemResult>> = {};
const notes: string[] = [];
const note = (s: string): void => {
  notes.push(s);
  console.log(`  note: ${s}`);
};

// ---------------------------------------------------------------- machine

function machine(): Record<string, unknown> {
  const cpuinfo = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '';
  const model = /model name\s*:\s*(.+)/.exec(cpuinfo)?.[1]?.trim() ?? os.cpus()[0]?.model ?? 'unknown';
  const version = (cmd: string, args: string[], re: RegExp): string | null => {
    const r = spawnSync(cmd, args, { encoding: 'utf8' });
    if (r.error) return null;
    return re.exec(`${r.stdout}${r.stderr}`)?.[1] ?? null;
  };
  return {
    cpu: model,
    cores: os.cpus().length,
    memoryGB: Math.round(os.totalmem() / 2 ** 30),
    os: `${os.type()} ${os.release()}`,
    node: process.version,
    redis: version('redis-server', ['--version'], /v=(\S+)/),
    nginx: version('nginx', ['-v'], /nginx\/(\S+)/),
    haproxy: HAPROXY === null ? null : version(HAPROXY, ['-v'], /version (\S+)/),
    loadavgAtStart: os.loadavg().map((x) => +x.toFixed(2)),
  };
}

// ---------------------------------------------------------------- build

/** Compiles src/ to bench/.build/dist with source maps (so profiles map back to src/*.ts), when stale. */
function build(): string {
  const cli = path.join(BUILD, 'cli', 'index.js');
  const newest = (dir: string): number => {
    let t = 0;
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
    }
    return t;
  };
  if (existsSync(cli) && statSync(cli).mtimeMs >= newest('src')) return cli;
  console.log('building src/ → bench/.build/dist (tsc, source maps) …');
  const r = spawnSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json', '--outDir', BUILD], { encoding: 'utf8' });
  if (!existsSync(cli)) throw new Error(`tsc produced no ${cli}: ${r.stdout}${r.stderr}`);
  if (r.status !== 0) note(`tsc reported type errors in src/ (emitted anyway): ${(r.stdout + r.stderr).split('\n')[0]}`);
  if (existsSync('src/limiter/redis/lua')) cpSync('src/limiter/redis/lua', path.join(BUILD, 'limiter', 'redis', 'lua'), { recursive: true });
  return cli;
}

// ---------------------------------------------------------------- servers

interface Server {
  key: string;
  port: number;
  adminPort?: number;
  proc: Proc;
  /** Extra clean-up (temp dirs). */
  cleanup?: () => void;
}

let CLI = '';
let upstreamUrl = '';
let upstreamPid = 0;
let redisPid: number | null = null;
let redisUrl: string | null = null;
let redis: Redis | null = null;

async function startUpstream(): Promise<Server> {
  const port = await freePort();
  const proc = start('upstream', process.execPath, [CLI, 'upstream', '--listen', `127.0.0.1:${port}`]);
  await waitForPort(proc, port);
  return { key: 'upstream', port, proc };
}

/** The Unix socket redis-server also listens on (the `rategate-redis-unix` system). */
let redisSocket: string | null = null;

async function startRedis(): Promise<Server | null> {
  if (spawnSync('redis-server', ['--version']).error) return null;
  const port = await freePort();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-bench-redis-'));
  redisSocket = path.join(dir, 'redis.sock');
  const proc = start('redis-server', 'redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--unixsocket', redisSocket, '--unixsocketperm', '700', '--save', '', '--appendonly', 'no']);
  await waitForPort(proc, port);
  return { key: 'redis', port, proc, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** `accessLog`: the default `info` level (one JSON line per request, to a temp file) instead of warn. */
/** `wrap`: a command to run the gateway under (valgrind); `launcher`: `wrap` replaces node and cli.js. */
async function startGateway(key: string, config: string, store: string, cpuProfDir?: string, accessLog = false, wrap: string[] = [], launcher = false): Promise<Server> {
  const port = await freePort();
  const adminPort = await freePort();
  const args = [
    ...(cpuProfDir !== undefined ? ['--cpu-prof', `--cpu-prof-dir=${cpuProfDir}`] : []),
    CLI,
    'serve',
    '--config',
    config,
    '--listen',
    `127.0.0.1:${port}`,
    '--admin-listen',
    `127.0.0.1:${adminPort}`,
    '--upstream',
    upstreamUrl,
    '--store',
    store,
  ];
  // Access log off (warn level), as nginx's and fastify's are; or on, written to a file as to a log volume.
  const logFile = accessLog ? path.join(mkdtempSync(path.join(os.tmpdir(), 'rategate-bench-log-')), 'access.log') : undefined;
  const [cmd, ...pre] = launcher ? wrap : wrap.length > 0 ? [...wrap, process.execPath] : [process.execPath];
  const proc = start(key, cmd!, [...pre, ...(launcher ? args.filter((a) => a !== CLI) : args)], { RATEGATE_LOG_LEVEL: accessLog ? 'info' : 'warn' }, logFile);
  // Under valgrind, Node takes a minute or more to start.
  await waitForPort(proc, port, wrap.length > 0 && !launcher ? 300_000 : 30_000);
  if (store !== 'memory') {
    const until = Date.now() + 10_000;
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${adminPort}/readyz`).then((r) => r.ok, () => false);
      if (ok) break;
      if (Date.now() > until) {
        await proc.stop();
        throw new Error(`${key}: /readyz not 200 within 10 s`);
      }
      await sleep(100);
    }
  }
  return { key, port, adminPort, proc, ...(logFile ? { cleanup: () => rmSync(path.dirname(logFile), { recursive: true, force: true }) } : {}) };
}

async function startThin(): Promise<Server> {
  const port = await freePort();
  const proc = start('thin', process.execPath, ['--import', 'tsx', 'bench/thin-forwarder.ts', '--listen', `127.0.0.1:${port}`, '--upstream', upstreamUrl]);
  await waitForPort(proc, port);
  return { key: 'thin', port, proc };
}

async function startFastify(): Promise<Server> {
  const port = await freePort();
  const proc = start('fastify', process.execPath, [
    '--import',
    'tsx',
    'bench/fastify-stack.ts',
    '--listen',
    `127.0.0.1:${port}`,
    '--upstream',
    upstreamUrl,
    '--redis',
    redisUrl!,
  ]);
  await waitForPort(proc, port);
  return { key: 'fastify', port, proc };
}

async function startNginx(): Promise<Server> {
  const port = await freePort();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-bench-nginx-'));
  const conf = readFileSync('bench/nginx.conf.tmpl', 'utf8')
    .replaceAll('{{DIR}}', dir)
    .replaceAll('{{PORT}}', String(port))
    .replaceAll('{{UPSTREAM_PORT}}', new URL(upstreamUrl).port);
  writeFileSync(path.join(dir, 'nginx.conf'), conf);
  const proc = start('nginx', 'nginx', ['-p', dir, '-c', path.join(dir, 'nginx.conf'), '-e', path.join(dir, 'error.log')]);
  await waitForPort(proc, port);
  return { key: 'nginx', port, proc, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

async function startHaproxy(): Promise<Server> {
  const port = await freePort();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-bench-haproxy-'));
  const conf = readFileSync('bench/haproxy.cfg.tmpl', 'utf8')
    .replaceAll('{{DIR}}', dir)
    .replaceAll('{{PORT}}', String(port))
    .replaceAll('{{UPSTREAM_PORT}}', new URL(upstreamUrl).port);
  writeFileSync(path.join(dir, 'haproxy.cfg'), conf);
  // -db: stay in the foreground, so that the process the bench measures is the one serving.
  const proc = start('haproxy', HAPROXY!, ['-db', '-f', path.join(dir, 'haproxy.cfg')]);
  await waitForPort(proc, port);
  return { key: 'haproxy', port, proc, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

async function stopServer(s: Server | null | undefined): Promise<void> {
  if (!s) return;
  await s.proc.stop(s.key === 'nginx' ? 'SIGQUIT' : 'SIGTERM');
  s.cleanup?.();
}

// ---------------------------------------------------------------- fixtures through the upstream API

interface Fixtures {
  statusId: string;
  userToken: string;
  appToken: string;
  userTokens: string[];
  takenUsername: string;
}

async function post(pathname: string, body: Record<string, string>, token?: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${upstreamUrl}${pathname}`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: new URLSearchParams(body).toString(),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (!res.ok) throw new Error(`POST ${pathname}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

async function fixtures(users: number): Promise<Fixtures> {
  const app = await post('/api/v1/apps', { client_name: 'rategate-bench', redirect_uris: 'urn:ietf:wg:oauth:2.0:oob', scopes: 'read write' });
  const tok = await post('/oauth/token', {
    grant_type: 'client_credentials',
    client_id: String(app.client_id),
    client_secret: String(app.client_secret),
    scope: 'read write',
  });
  const appToken = String(tok.access_token);
  const userTokens: string[] = [];
  for (let i = 0; i < users; i += 8) {
    const batch = Array.from({ length: Math.min(8, users - i) }, (_, j) =>
      post(
        '/api/v1/accounts',
        { username: `bench${i + j}`, email: `bench${i + j}@example.com`, password: 'password123', agreement: 'true', locale: 'en' },
        appToken,
      ),
    );
    for (const t of await Promise.all(batch)) userTokens.push(String(t.access_token));
  }
  const status = await post('/api/v1/statuses', { status: 'Hello from the rategate bench', visibility: 'public' }, userTokens[0]);
  return { statusId: String(status.id), userToken: userTokens[0]!, appToken, userTokens, takenUsername: 'bench0' };
}

// ---------------------------------------------------------------- Redis command counts

interface RedisCounts {
  /** Every command Redis executed, including those a Lua script ran. */
  all: number;
  /** EVAL/EVALSHA/FCALL: each is one client call (one round trip, pipelined or not). */
  scripts: number;
}

/** Commands executed so far, from INFO commandstats (the bench's own INFO/FLUSHALL/… excluded). */
async function redisCalls(): Promise<RedisCounts> {
  const out = { all: 0, scripts: 0 };
  if (!redis) return out;
  const info = await redis.info('commandstats');
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    const name = m[1]!.split('|')[0]!;
    if (['info', 'ping', 'flushall', 'client', 'config', 'hello', 'select', 'command', 'script'].includes(name)) continue;
    out.all += Number(m[2]);
    if (/^(eval|evalsha|eval_ro|evalsha_ro|fcall|fcall_ro)$/.test(name)) out.scripts += Number(m[2]);
  }
  return out;
}

// ---------------------------------------------------------------- scenarios

let FX: Fixtures;

async function load(port: number, pathname: string, countRedis: boolean, extra: Partial<LoadSpec> = {}, cpuOf?: CpuPids): Promise<LoadResult> {
  const spec: LoadSpec = {
    port,
    path: pathname,
    headers: { authorization: `Bearer ${FX.userToken}` },
    connections: CONNECTIONS,
    durationSec: DURATION,
    warmupSec: WARMUP,
    ...extra,
  };
  const snap: { before?: Promise<RedisCounts> } = {};
  const cpuSnap = (): number[] =>
    cpuOf ? [...[cpuOf.system, cpuOf.upstream, cpuOf.redis].map((p) => (p === null ? 0 : cpuMsOfTree(p))), cpuOf.system === null ? 0 : cpuMsOfTree(cpuOf.system, 'user')] : [];
  let cpuBefore: number[] = [];
  let cpuAfter: number[] = [];
  const r = await runScript<LoadResult>('bench/load.ts', spec, (DURATION + WARMUP + 60) * 1000, (line) => {
    if (line === 'MEASURE') {
      cpuBefore = cpuSnap();
      if (countRedis) snap.before = redisCalls();
    }
    if (line === 'MEASURED') cpuAfter = cpuSnap();
  });
  if (countRedis && snap.before !== undefined) {
    const b = await snap.before;
    const a = await redisCalls();
    r.redisCallsPerRequest = r.requests > 0 ? (a.all - b.all) / r.requests : NaN;
    r.redisScriptCallsPerRequest = r.requests > 0 ? (a.scripts - b.scripts) / r.requests : NaN;
  }
  if (cpuOf && cpuAfter.length === 4 && r.requests > 0) {
    const per = (i: number): number => ((cpuAfter[i]! - cpuBefore[i]!) * 1000) / r.requests;
    const c: CpuPerRequest = {
      system: cpuOf.system === null ? null : per(0),
      systemUser: cpuOf.system === null ? null : per(3),
      systemKernel: cpuOf.system === null ? null : per(0) - per(3),
      upstream: per(1),
      redis: cpuOf.redis === null ? null : per(2),
      loadGenerator: ((r.loadGeneratorCpuMs ?? NaN) * 1000) / r.requests,
      total: 0,
    };
    c.total = (c.system ?? 0) + c.upstream + (c.redis ?? 0) + c.loadGenerator;
    r.cpuUsPerRequest = c;
  }
  return r;
}

async function paced(port: number, pathname: string): Promise<PacedResult> {
  return runScript<PacedResult>(
    'bench/paced.ts',
    { port, path: pathname, headers: { authorization: `Bearer ${FX.userToken}` }, rate: RATE, durationSec: DURATION, warmupSec: QUICK ? 0.5 : 1, connections: CONNECTIONS },
    (DURATION + 70) * 1000,
  );
}

function mixSpec(): MixSpec {
  return { statusId: FX.statusId, appToken: FX.appToken, userTokens: FX.userTokens, takenUsername: FX.takenUsername, ipPool: 20_000 };
}

const want = (k: SystemKey): boolean => (ONLY === null ? !DIAGNOSTIC.has(k) : ONLY.has(k));

async function startSystem(key: SystemKey, config = BENCH_CONFIG): Promise<Server | null> {
  switch (key) {
    case 'direct':
      return null;
    case 'thin':
      return startThin();
    case 'nginx':
      return startNginx();
    case 'haproxy':
      return startHaproxy();
    case 'fastify':
      return startFastify();
    case 'rategate-memory':
      return startGateway(key, config, 'memory');
    case 'rategate-memory-log':
      return startGateway(key, config, 'memory', undefined, true);
    case 'rategate-memory-deferred':
      return startGateway(key, config, 'memory', undefined, false, [process.execPath, 'bench/deferred-memory.mjs', path.dirname(CLI)], true);
    case 'rategate-redis':
      return startGateway(key, config, redisUrl!);
    case 'rategate-redis-unix':
      return startGateway(key, config, `redis+unix://${redisSocket!}`);
  }
}

/** Why a system cannot run here, or null. */
function unavailable(key: SystemKey): string | null {
  if (key === 'nginx' && spawnSync('nginx', ['-v']).error) return 'nginx not installed (apt-get install -y nginx)';
  if (key === 'haproxy' && HAPROXY === null) return 'HAProxy not installed (apt-get install -y haproxy): its row is missing';
  if (REDIS_SYSTEMS.has(key) && redisUrl === null) return 'no redis-server binary';
  if (key === 'rategate-redis' && redisUnsupported !== null) return redisUnsupported;
  return null;
}
let redisUnsupported: string | null = null;

/** Starts a system for the main scenarios; null with `results[key].skipped` set when it cannot run. */
async function launch(key: SystemKey): Promise<Server | null | 'skipped'> {
  const r: SystemResult = { label: LABELS[key] };
  results[key] = r;
  const why = unavailable(key);
  if (why !== null) {
    r.skipped = why;
    note(`${LABELS[key]}: skipped — ${why}`);
    return 'skipped';
  }
  try {
    return await startSystem(key);
  } catch (err) {
    const msg = (err as Error).message;
    if (key === 'rategate-redis' && /not available/.test(msg)) {
      redisUnsupported = 'the Redis store is not wired into src/limiter/factory.ts yet ("Redis stores are not available in this build yet")';
    }
    r.skipped = key === 'rategate-redis' && redisUnsupported !== null ? redisUnsupported : `failed to start: ${msg.slice(0, 300)}`;
    note(`${LABELS[key]}: skipped — ${r.skipped}`);
    return 'skipped';
  }
}

interface Rounds {
  forwarded: LoadResult[];
  fixedRate: PacedResult[];
  rejected: LoadResult[];
}
const rounds: Partial<Record<SystemKey, Rounds>> = {};

/** Notes a scenario whose answers are not what it is meant to measure (so a wrong figure cannot pass unseen). */
function expectStatus(what: string, statuses: Record<string, number>, code: number): void {
  const total = Object.values(statuses).reduce((a, b) => a + b, 0);
  const ok = statuses[String(code)] ?? 0;
  if (total === 0 || ok / total < 0.99) note(`${what}: expected ${code}, got ${JSON.stringify(statuses)}`);
}

/** One round of the forwarded, fixed-rate and (for limiters) rejected scenarios against a running system. */
async function benchRound(key: SystemKey, port: number, round: number, server: Server | null): Promise<void> {
  if (server !== null && server.proc.child.exitCode !== null) {
    note(`${LABELS[key]} exited during the bench (${server.proc.child.exitCode}): ${server.proc.output().slice(-300)}`);
    return;
  }
  const rr = (rounds[key] ??= { forwarded: [], fixedRate: [], rejected: [] });
  const usesRedis = REDIS_SYSTEMS.has(key);
  // The first round warms each system up longer (JIT, pools); later rounds find it warm.
  const warmupSec = round === 0 ? WARMUP : 1;
  const statusPath = `/api/v1/statuses/${FX.statusId}`;
  process.stdout.write(`${`[${round + 1}/${ROUNDS}] ${LABELS[key]}`.padEnd(34)} forwarded `);
  const f = await load(port, statusPath, usesRedis, { warmupSec }, { system: server?.proc.pid ?? null, upstream: upstreamPid, redis: usesRedis ? redisPid : null });
  rr.forwarded.push(f);
  expectStatus(`${LABELS[key]} forwarded`, f.statuses, 200);
  const own = f.cpuUsPerRequest?.system;
  process.stdout.write(`${fmtInt(f.rps).padStart(7)} req/s${own !== undefined && own !== null ? ` (${own.toFixed(1)} µs CPU/req)` : ''}`);
  // The access-log variant is there for its forwarded throughput and CPU only.
  if (key === 'rategate-memory-log') {
    process.stdout.write('\n');
    return;
  }
  process.stdout.write(` · fixed ${RATE}/s `);
  const p = await paced(port, statusPath);
  rr.fixedRate.push(p);
  expectStatus(`${LABELS[key]} fixed rate`, p.statuses, 200);
  process.stdout.write(`p99 ${fmtMs(p.p99).padStart(6)} ms`);
  if (key !== 'direct' && key !== 'thin') {
    const rj = await load(port, '/api/v1/exhausted', usesRedis, { warmupSec });
    rr.rejected.push(rj);
    expectStatus(`${LABELS[key]} rejected`, rj.statuses, 429);
    process.stdout.write(` · rejected ${fmtInt(rj.rps).padStart(7)} req/s`);
  }
  process.stdout.write('\n');
}

/** Each figure from its best round: highest throughput; for the fixed rate, the lowest p99. */
function pickBest(): void {
  for (const [key, rr] of Object.entries(rounds) as Array<[SystemKey, Rounds]>) {
    const r = results[key]!;
    const maxBy = <T>(xs: T[], f: (x: T) => number): T | undefined => xs.reduce<T | undefined>((a, x) => (a === undefined || f(x) > f(a) ? x : a), undefined);
    const fw = maxBy(rr.forwarded, (x) => x.rps);
    const fr = maxBy(rr.fixedRate, (x) => -x.p99);
    const rj = maxBy(rr.rejected, (x) => x.rps);
    if (fw) r.forwarded = fw;
    if (fr) r.fixedRate = fr;
    if (rj) r.rejected = rj;
  }
}

async function benchMixed(key: SystemKey, upstreamPort: number): Promise<void> {
  const r = results[key];
  if (!r || r.skipped !== undefined) return;
  if (key === 'rategate-redis') await redis!.flushall();
  const server = await startSystem(key, SEED_CONFIG);
  try {
    process.stdout.write(`${LABELS[key].padEnd(28)} mixed seed traffic … `);
    r.mixed = await load(server?.port ?? upstreamPort, '/', key === 'rategate-redis', { mix: mixSpec(), headers: {} });
    process.stdout.write(`${fmtInt(r.mixed.rps)} req/s, ${statusSummary(r.mixed.statuses)}\n`);
  } finally {
    await stopServer(server);
  }
}

interface MemoryResult {
  clients: number;
  path: string;
  seconds: number;
  rps: number;
  rssBeforeMB: number;
  rssAfterMB: number;
  rssPeakMB: number;
  heapUsedBeforeMB: number | null;
  heapUsedAfterMB: number | null;
  statuses: Record<string, number>;
}

async function heapUsed(adminPort: number): Promise<number | null> {
  const text = await fetch(`http://127.0.0.1:${adminPort}/metrics`).then((r) => r.text(), () => '');
  const m = /^nodejs_heap_size_used_bytes\s+(\S+)/m.exec(text);
  return m ? Number(m[1]) / 2 ** 20 : null;
}

async function benchMillion(): Promise<MemoryResult> {
  const gw = await startGateway('rategate-memory (clients)', SEED_CONFIG, 'memory');
  try {
    // Warm the process (JIT, pools) from one client, then measure the baseline.
    await runScript('bench/million.ts', { port: gw.port, path: '/api/v1/statuses/1', n: 5000, offset: 1_500_000 }, 60_000);
    await sleep(1000);
    const heapBefore = await heapUsed(gw.adminPort!);
    const rssBefore = rssOf(gw.proc.pid);
    let peak = rssBefore;
    const poll = setInterval(() => (peak = Math.max(peak, rssOf(gw.proc.pid))), 250);
    console.log(`rategate memory: ${CLIENTS.toLocaleString('en')} distinct clients (X-Forwarded-For), RSS before ${mb(rssBefore)} …`);
    const r = await runScript<{ n: number; seconds: number; rps: number; statuses: Record<string, number> }>(
      'bench/million.ts',
      { port: gw.port, path: '/api/v1/statuses/1', n: CLIENTS, connections: 32, depth: 16 },
      15 * 60_000,
    );
    clearInterval(poll);
    await sleep(500);
    const rssAfter = rssOf(gw.proc.pid);
    const heapAfter = await heapUsed(gw.adminPort!);
    peak = Math.max(peak, rssAfter);
    const out: MemoryResult = {
      clients: r.n,
      path: 'GET /api/v1/statuses/1 (no such status: the upstream answers a small JSON 404; matches ip-access)',
      seconds: r.seconds,
      rps: r.rps,
      rssBeforeMB: rssBefore / 2 ** 20,
      rssAfterMB: rssAfter / 2 ** 20,
      rssPeakMB: peak / 2 ** 20,
      heapUsedBeforeMB: heapBefore,
      heapUsedAfterMB: heapAfter,
      statuses: r.statuses,
    };
    console.log(
      `  ${r.n.toLocaleString('en')} requests in ${r.seconds.toFixed(1)} s (${fmtInt(r.rps)} req/s), RSS ${mb(rssBefore)} → ${mb(rssAfter)} (peak ${mb(peak)}), heap ${heapBefore?.toFixed(0)} → ${heapAfter?.toFixed(0)} MB`,
    );
    return out;
  } finally {
    await stopServer(gw);
  }
}

/** Distinct clients of the many-client scenario, each sending MANY_CLIENTS_EACH requests (spread: client i % N). */
const MANY_CLIENTS = Number(argv.clients ?? 100_000);
const MANY_CLIENTS_EACH = 3;

/**
 * The many-client scenario beside the hot-key one: MANY_CLIENTS distinct clients (X-Forwarded-For), a few
 * requests each, interleaved so that a client's requests are far apart (no key is hot: leases cannot
 * help, this is the store's per-request path). Each system alone, started fresh (Redis flushed).
 */
async function benchManyClients(key: 'thin' | 'rategate-memory' | 'rategate-redis'): Promise<void> {
  // Also run with --skip load, which leaves the system without a result yet.
  const r = (results[key] ??= { label: LABELS[key] });
  if (r.skipped !== undefined || unavailable(key) !== null) return;
  if (key === 'rategate-redis') await redis!.flushall();
  const server = await startSystem(key);
  try {
    const port = server!.port;
    await runScript('bench/million.ts', { port, path: '/api/v1/statuses/1', n: 5000, offset: 1_500_000 }, 60_000);
    process.stdout.write(`${LABELS[key].padEnd(28)} ${MANY_CLIENTS.toLocaleString('en')} clients × ${MANY_CLIENTS_EACH} … `);
    const pids = [server!.proc.pid, key === 'rategate-redis' ? redisPid : null];
    const before = pids.map((p) => (p === null ? 0 : cpuMsOfTree(p)));
    const m = await runScript<{ n: number; seconds: number; rps: number; statuses: Record<string, number> }>(
      'bench/million.ts',
      { port, path: '/api/v1/statuses/1', n: MANY_CLIENTS * MANY_CLIENTS_EACH, clients: MANY_CLIENTS, connections: CONNECTIONS, depth: 16 },
      15 * 60_000,
    );
    const per = (i: number): number => ((cpuMsOfTree(pids[i]!) - before[i]!) * 1000) / m.n;
    r.manyClients = { clients: MANY_CLIENTS, requests: m.n, rps: m.rps, statuses: m.statuses, cpuUsSystem: per(0), cpuUsRedis: pids[1] === null ? null : per(1) };
    process.stdout.write(`${fmtInt(m.rps)} req/s, ${r.manyClients.cpuUsSystem.toFixed(1)} µs CPU/req${r.manyClients.cpuUsRedis === null ? '' : ` + redis ${r.manyClients.cpuUsRedis.toFixed(1)}`}\n`);
  } finally {
    await stopServer(server);
  }
}

interface PerClientResult {
  clients: number;
  buckets: number;
  heapBytesPerClient: number;
  rssBytesPerClient: number;
  heapBytesPerClientAfterExpiry: number;
}

/** bench/memory-per-client.ts: what a distinct client costs the memory store and the request path in front of it. */
async function benchPerClient(): Promise<PerClientResult> {
  const clients = 150_000;
  process.stdout.write(`memory per distinct client (${clients.toLocaleString('en')} clients, in-process, full GC) … `);
  const r = await runScript<PerClientResult>('bench/memory-per-client.ts', { clients }, 180_000);
  process.stdout.write(`${r.rssBytesPerClient} B RSS, ${r.heapBytesPerClient} B heap + external; ${r.heapBytesPerClientAfterExpiry} B left after expiry\n`);
  return r;
}

interface InstructionsResult {
  tool: 'perf' | 'callgrind';
  requests: number;
  perRequest: number;
  /**
   * Callgrind only: the main thread's (the event loop's) share. V8 compiles and marks on other threads,
   * still busy after thousands of requests under valgrind; the main thread's count is the steadier one.
   */
  mainThreadPerRequest?: number | null;
}

/** `perf stat -e instructions` counts on this machine (not in most VMs, which hide the PMU). */
function perfCountsInstructions(): boolean {
  const r = spawnSync('perf', ['stat', '-e', 'instructions', '-x,', 'true'], { encoding: 'utf8' });
  return !r.error && /^\d+,/m.test(r.stderr ?? '');
}

/**
 * Instructions per forwarded request of the gateway process: with perf where it counts, else under
 * `valgrind --tool=callgrind` (instrumentation switched on after start-up, counters zeroed after a
 * warm-up, so the count is the measured requests' only). About 50× slower than native: a few hundred
 * requests, 8 connections, each system started alone. Counts user-space instructions of every thread
 * (V8's compiler and GC threads too), none of the kernel's: socket syscalls show in the CPU table's
 * system time instead. Much steadier than req/s on a shared machine.
 */
async function benchInstructions(key: 'thin' | 'rategate-memory' | 'rategate-redis', usePerf: boolean): Promise<InstructionsResult | null> {
  // V8 keeps optimizing (on threads callgrind also counts) for the first thousand requests or so.
  const warm = QUICK ? 300 : 1500;
  const measured = QUICK ? 300 : 500;
  const target = { path: `/api/v1/statuses/${FX.statusId}`, headers: { authorization: `Bearer ${FX.userToken}` }, clients: 1, connections: 8, depth: 1 };
  if (key === 'rategate-redis') await redis!.flushall();
  // The dumps stay in bench/.build/callgrind/<system>/ for callgrind_annotate (native code and V8 builtins are named; JIT code is not).
  const cgDir = path.resolve('bench', '.build', 'callgrind', key);
  rmSync(cgDir, { recursive: true, force: true });
  mkdirSync(cgDir, { recursive: true });
  const wrap = usePerf
    ? []
    : ['valgrind', '--tool=callgrind', '--instr-atstart=no', '--separate-threads=yes', `--callgrind-out-file=${path.join(cgDir, 'callgrind.out.%p')}`];
  process.stdout.write(`${LABELS[key].padEnd(28)} instructions per request (${usePerf ? 'perf stat' : 'callgrind'}) … `);
  let server: Server;
  if (key === 'thin') {
    const port = await freePort();
    const proc = start('thin', wrap[0] ?? process.execPath, [...wrap.slice(1), ...(wrap.length ? [process.execPath] : []), '--import', 'tsx', 'bench/thin-forwarder.ts', '--listen', `127.0.0.1:${port}`, '--upstream', upstreamUrl]);
    await waitForPort(proc, port, 300_000);
    server = { key, port, proc };
  } else server = await startGateway(key, BENCH_CONFIG, key === 'rategate-memory' ? 'memory' : redisUrl!, undefined, false, wrap);
  const pid = server.proc.pid;
  const control = (...args: string[]): void => {
    const r = spawnSync('callgrind_control', [...args, String(pid)], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`callgrind_control ${args.join(' ')}: ${r.stderr}`);
  };
  try {
    if (!usePerf) control('-i', 'on');
    await runScript('bench/million.ts', { port: server.port, n: warm, ...target }, 600_000);
    let count: number;
    let mainThread = NaN;
    if (usePerf) {
      const perf = start('perf', 'perf', ['stat', '-e', 'instructions', '-x,', '-p', String(pid)]);
      await sleep(200);
      await runScript('bench/million.ts', { port: server.port, n: measured, ...target }, 600_000);
      await perf.stop('SIGINT');
      count = Number(/^(\d+),/m.exec(perf.output())?.[1] ?? NaN);
    } else {
      control('-z');
      await runScript('bench/million.ts', { port: server.port, n: measured, ...target }, 600_000);
      const before = new Set(readdirSync(cgDir));
      control('-d');
      const until = Date.now() + 30_000;
      let files: string[] = [];
      while (files.length === 0 && Date.now() < until) {
        await sleep(200);
        files = readdirSync(cgDir).filter((f) => !before.has(f));
      }
      await sleep(1000);
      // --separate-threads: one file per thread, `…-01` the main thread (the event loop).
      count = 0;
      for (const f of readdirSync(cgDir).filter((x) => !before.has(x))) {
        const n = Number(/^totals:\s+(\d+)/m.exec(readFileSync(path.join(cgDir, f), 'utf8'))?.[1] ?? NaN);
        count += n;
        if (f.endsWith('-01')) mainThread = n;
      }
    }
    const perRequest = count / measured;
    const main = mainThread / measured;
    process.stdout.write(
      `${Number.isFinite(perRequest) ? `${(perRequest / 1000).toFixed(0)} k` : 'n/a'}${Number.isFinite(main) ? `, main thread ${(main / 1000).toFixed(0)} k` : ''} (${measured} requests after ${warm})\n`,
    );
    return Number.isFinite(perRequest) ? { tool: usePerf ? 'perf' : 'callgrind', requests: measured, perRequest, mainThreadPerRequest: Number.isFinite(main) ? main : null } : null;
  } finally {
    await stopServer(server);
  }
}

async function profileGateway(key: 'rategate-memory' | 'rategate-redis'): Promise<ProfileSummary | null> {
  const dir = path.resolve('bench', '.build', 'profiles', key);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  if (key === 'rategate-redis') await redis!.flushall();
  const gw = await startGateway(key, BENCH_CONFIG, key === 'rategate-memory' ? 'memory' : redisUrl!, dir);
  process.stdout.write(`${LABELS[key].padEnd(28)} under --cpu-prof, forwarded for ${PROFILE_SEC} s … `);
  try {
    const r = await runScript<LoadResult>(
      'bench/load.ts',
      { port: gw.port, path: `/api/v1/statuses/${FX.statusId}`, headers: { authorization: `Bearer ${FX.userToken}` }, connections: CONNECTIONS, durationSec: PROFILE_SEC, warmupSec: 1 },
      (PROFILE_SEC + 60) * 1000,
    );
    process.stdout.write(`${fmtInt(r.rps)} req/s (profiling slows it)\n`);
    // For bench/profile-diff.ts: how many requests the profile covers.
    writeFileSync(path.join(dir, 'load.json'), `${JSON.stringify({ requests: r.requests, rps: r.rps, seconds: PROFILE_SEC })}\n`);
  } finally {
    await stopServer(gw);
  }
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (file === undefined) {
    note(`${key}: no .cpuprofile written`);
    return null;
  }
  return summarize(path.join(dir, file), 25);
}

// ---------------------------------------------------------------- report

const fmtInt = (n: number | undefined): string => (n === undefined || !Number.isFinite(n) ? '—' : Math.round(n).toLocaleString('en'));
const fmtMs = (n: number | undefined): string => (n === undefined || !Number.isFinite(n) ? '—' : n < 10 ? n.toFixed(2) : n.toFixed(1));
const mb = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(0)} MB`;
const fmtUs = (n: number | null | undefined): string => (n === undefined || n === null || !Number.isFinite(n) ? '—' : n.toFixed(1));

function statusSummary(s: Record<string, number>): string {
  const total = Object.values(s).reduce((a, b) => a + b, 0) || 1;
  const by = (f: (c: number) => boolean): number => Object.entries(s).reduce((a, [c, n]) => (f(Number(c)) ? a + n : a), 0);
  const pct = (n: number): string => `${((100 * n) / total).toFixed(0)}%`;
  return `2xx ${pct(by((c) => c < 300))}, 429 ${pct(by((c) => c === 429))}, other 4xx ${pct(by((c) => c >= 400 && c < 500 && c !== 429))}, 5xx ${pct(by((c) => c >= 500))}`;
}

interface Ratio {
  name: string;
  value: number | null;
  /**
   * The same throughput ratio estimated from CPU time: with every core busy, req/s ≈ cores / total CPU
   * per request, so a/b ≈ total(b) / total(a). Steadier than req/s on a shared machine.
   */
  byCpu?: number | null;
  target: string;
  pass: boolean | null;
  detail: string;
}

/** redis-server CPU µs per forwarded request before leases (quick run on this machine, 2026-11-24): issue 24's ÷ 5 is from it. */
const REDIS_US_BEFORE_LEASES = 14.1;

/** The goals of issue 14 (ratios against the bare Node forwarder, the Node ceiling), measured in this run. */
function ratios(perClient: PerClientResult | null): Ratio[] {
  const rps = (k: SystemKey, s: 'forwarded' | 'rejected'): number | null => results[k]?.[s]?.rps ?? null;
  const div = (a: number | null, b: number | null): number | null => (a !== null && b !== null && b > 0 ? a / b : null);
  const out: Ratio[] = [];
  const total = (k: SystemKey, s: 'forwarded' | 'rejected' = 'forwarded'): number | null => results[k]?.[s]?.cpuUsPerRequest?.total ?? null;
  const ratio = (name: string, value: number | null, min: number, missing: string, byCpu: number | null = null): void => {
    out.push({ name, value, byCpu, target: `≥ ${min}`, pass: value === null ? null : value >= min, detail: value === null ? missing : '' });
  };
  const why = (...keys: SystemKey[]): string => keys.map((k) => results[k]?.skipped).filter(Boolean).join('; ') || 'not measured';
  ratio('rategate memory / bare forwarder (forwarded req/s)', div(rps('rategate-memory', 'forwarded'), rps('thin', 'forwarded')), 0.9, why('rategate-memory', 'thin'), div(total('thin'), total('rategate-memory')));
  ratio('rategate Redis / bare forwarder (forwarded req/s)', div(rps('rategate-redis', 'forwarded'), rps('thin', 'forwarded')), 0.8, why('rategate-redis', 'thin'), div(total('thin'), total('rategate-redis')));
  ratio('rategate Redis / fastify peer (forwarded req/s)', div(rps('rategate-redis', 'forwarded'), rps('fastify', 'forwarded')), 1.6, why('rategate-redis', 'fastify'), div(total('fastify'), total('rategate-redis')));
  ratio('rejected / forwarded req/s (rategate Redis)', div(rps('rategate-redis', 'rejected'), rps('rategate-redis', 'forwarded')), 2, why('rategate-redis'));
  ratio('rejected / forwarded req/s (rategate memory)', div(rps('rategate-memory', 'rejected'), rps('rategate-memory', 'forwarded')), 2, why('rategate-memory'));
  ratio(
    'access log on / off, memory (forwarded req/s)',
    div(rps('rategate-memory-log', 'forwarded'), rps('rategate-memory', 'forwarded')),
    0.9,
    why('rategate-memory-log', 'rategate-memory'),
    div(total('rategate-memory'), total('rategate-memory-log')),
  );
  const bpc = perClient?.rssBytesPerClient ?? null;
  out.push({
    name: 'memory store per distinct client, bytes of RSS',
    value: bpc,
    target: '≤ 250',
    pass: bpc === null ? null : bpc <= 250 && (perClient!.heapBytesPerClientAfterExpiry ?? Infinity) <= 25,
    detail: bpc === null ? 'not measured (--skip memory)' : '',
  });
  const calls = results['rategate-redis']?.rejected?.redisCallsPerRequest;
  out.push({
    name: 'Redis commands per rejection (rategate-redis)',
    value: calls ?? null,
    target: '≈ 0 (< 0.01)',
    pass: calls === undefined ? null : calls < 0.01,
    detail: calls === undefined ? why('rategate-redis') : '',
  });
  // Issue 24 (leases): the Redis path near the memory path, and the store's work per request cut.
  const many = (k: SystemKey): number | null => results[k]?.manyClients?.rps ?? null;
  ratio('issue 24: rategate Redis / bare forwarder, hot key (forwarded req/s)', div(rps('rategate-redis', 'forwarded'), rps('thin', 'forwarded')), 0.85, why('rategate-redis', 'thin'), div(total('thin'), total('rategate-redis')));
  ratio(`issue 24: rategate Redis / bare forwarder, ${MANY_CLIENTS.toLocaleString('en')} clients (req/s)`, div(many('rategate-redis'), many('thin')), 0.7, 'not measured (--skip clients)');
  const redisUs = results['rategate-redis']?.forwarded?.cpuUsPerRequest?.redis ?? null;
  out.push({
    name: 'issue 24: redis-server CPU per forwarded request, hot key, µs',
    value: redisUs,
    target: `≤ ${(REDIS_US_BEFORE_LEASES / 5).toFixed(1)} (÷ 5 of ${REDIS_US_BEFORE_LEASES})`,
    pass: redisUs === null ? null : redisUs <= REDIS_US_BEFORE_LEASES / 5,
    detail: redisUs === null ? why('rategate-redis') : '',
  });
  const direct = results.direct?.fixedRate?.p99;
  for (const k of ['rategate-redis', 'rategate-memory'] as const) {
    const p = results[k]?.fixedRate?.p99;
    const added = p !== undefined && direct !== undefined ? p - direct : null;
    out.push({
      name: `p99 added over direct upstream at ${RATE} req/s (${LABELS[k]}), ms`,
      value: added,
      target: '≤ 2',
      pass: added === null ? null : added <= 2,
      detail: added === null ? why(k, 'direct') : '',
    });
  }
  return out;
}

function table(): string {
  const lines: string[] = [];
  const head1 = `${''.padEnd(28)} ${'forwarded, 32 conn'.padEnd(32)} ${`fixed ${RATE}/s`.padEnd(15)} ${'rejected, 32 conn'.padEnd(24)} ${'mixed seed, 32 conn'.padEnd(22)}`;
  const head2 = `${'system'.padEnd(28)} ${'req/s'.padStart(8)} ${'µs CPU'.padStart(7)} ${'p50'.padStart(7)} ${'p99'.padStart(7)}  ${'p50'.padStart(6)} ${'p99'.padStart(6)}   ${'req/s'.padStart(8)} ${'p50'.padStart(7)} ${'p99'.padStart(7)}  ${'req/s'.padStart(8)} ${'p99'.padStart(7)} ${'429'.padStart(5)}`;
  lines.push(head1, head2, '-'.repeat(head2.length));
  for (const k of ORDER) {
    const r = results[k];
    if (!r) continue;
    if (r.skipped !== undefined) {
      lines.push(`${r.label.padEnd(28)} skipped: ${r.skipped.slice(0, 100)}`);
      continue;
    }
    const f = r.forwarded;
    const fr = r.fixedRate;
    const rj = r.rejected;
    const mx = r.mixed;
    const mxTotal = mx ? Object.values(mx.statuses).reduce((a, b) => a + b, 0) : 0;
    const mx429 = mx ? `${(((mx.statuses['429'] ?? 0) * 100) / (mxTotal || 1)).toFixed(0)}%` : '—';
    lines.push(
      `${r.label.padEnd(28)} ${fmtInt(f?.rps).padStart(8)} ${fmtUs(f?.cpuUsPerRequest?.system).padStart(7)} ${fmtMs(f?.p50).padStart(7)} ${fmtMs(f?.p99).padStart(7)}  ${fmtMs(fr?.p50).padStart(6)} ${fmtMs(fr?.p99).padStart(6)}   ${(rj ? fmtInt(rj.rps) : '—').padStart(8)} ${fmtMs(rj?.p50).padStart(7)} ${fmtMs(rj?.p99).padStart(7)}  ${fmtInt(mx?.rps).padStart(8)} ${fmtMs(mx?.p99).padStart(7)} ${mx429.padStart(5)}`,
    );
  }
  lines.push(
    "(µs CPU: the system's own CPU time per forwarded request, /proc, the most stable figure on a shared machine; latencies in ms; p50/p99 at fixed rate from an open-loop paced client, the others from autocannon)",
  );
  return lines.join('\n');
}

/**
 * Where the CPU goes: µs of CPU time per forwarded request in each process, in the best round. On a
 * machine whose cores are all busy (gateway, upstream, Redis and load generator share them),
 * throughput is about cores / total, so a ratio between two systems is about the inverse ratio of
 * their totals, whatever part of it the gateway is.
 */
function cpuTable(): string {
  const cores = os.cpus().length;
  const us = (x: number | null | undefined): string => (x === null || x === undefined || Number.isNaN(x) ? '—' : x.toFixed(1));
  const lines = [
    `CPU time per forwarded request, µs (measured phase, ${CONNECTIONS} connections; ${cores} cores ⇒ at most ${cores} × 10⁶ / total req/s with every core busy)`,
    `${'system'.padEnd(28)} ${'itself'.padStart(7)} ${'(user'.padStart(6)} ${'+ kernel)'.padStart(9)} ${'upstream'.padStart(9)} ${'redis'.padStart(7)} ${'load gen'.padStart(9)} ${'total'.padStart(7)} ${'cores busy'.padStart(11)}`,
  ];
  for (const k of ORDER) {
    const f = results[k]?.forwarded;
    const c = f?.cpuUsPerRequest;
    if (!f || !c) continue;
    lines.push(
      `${LABELS[k].padEnd(28)} ${us(c.system).padStart(7)} ${us(c.systemUser).padStart(6)} ${us(c.systemKernel).padStart(9)} ${us(c.upstream).padStart(9)} ${us(c.redis).padStart(7)} ${us(c.loadGenerator).padStart(9)} ${us(c.total).padStart(7)} ${((c.total * f.rps) / 1e6).toFixed(2).padStart(11)}`,
    );
  }
  return lines.join('\n');
}

interface ChartInput {
  systems: Partial<Record<SystemKey, SystemResult>>;
  connections: number;
  rate: number;
  machine: Record<string, unknown>;
  memory: MemoryResult | null;
  date: string;
}

function chart(c: ChartInput): string {
  const keys = ORDER.filter((k) => c.systems[k] && c.systems[k]!.skipped === undefined);
  const sys = (k: SystemKey): SystemResult => c.systems[k]!;
  const panels: Panel[] = [
    {
      title: `Throughput at ${c.connections} connections, requests forwarded to the upstream (higher is better)`,
      unit: 'req/s',
      series: ['forwarded (3 rules matched)', 'mixed seed traffic'],
      colors: ['#2563eb', '#16a34a'],
      groups: keys.map((k) => ({ label: LABELS[k], values: [sys(k).forwarded?.rps ?? null, sys(k).mixed?.rps ?? null] })),
    },
    {
      title: `Throughput at ${c.connections} connections, requests rejected by an exhausted bucket (higher is better)`,
      unit: 'req/s',
      series: ['rejected (429)'],
      colors: ['#dc2626'],
      groups: keys.filter((k) => sys(k).rejected !== undefined).map((k) => ({ label: LABELS[k], values: [sys(k).rejected?.rps ?? null] })),
    },
    {
      title: `Latency at a fixed ${c.rate} req/s (lower is better)`,
      unit: 'ms',
      series: ['p50', 'p99'],
      colors: ['#9333ea', '#ea580c'],
      groups: keys.map((k) => ({ label: LABELS[k], values: [sys(k).fixedRate?.p50 ?? null, sys(k).fixedRate?.p99 ?? null] })),
    },
  ];
  const m = c.machine;
  const mem = c.memory ? ` · ${c.memory.clients.toLocaleString('en')} clients: RSS ${c.memory.rssBeforeMB.toFixed(0)} → ${c.memory.rssAfterMB.toFixed(0)} MB` : '';
  const caption = `${m.cpu}, ${m.cores} cores, Node ${m.node}, Redis ${m.redis ?? '—'}, nginx ${m.nginx ?? '—'} · ${c.date.slice(0, 10)}${mem}`;
  return renderChart(panels, caption);
}

/** `--render FILE.json`: redraws the SVG next to a results file (after a chart change), without measuring. */
function renderOnly(file: string): void {
  const j = JSON.parse(readFileSync(file, 'utf8')) as {
    systems: Partial<Record<SystemKey, SystemResult>>;
    settings: { connections: number; fixedRate: number };
    machine: Record<string, unknown>;
    memory: MemoryResult | null;
    generatedAt: string;
  };
  const out = file.replace(/\.json$/, '.svg');
  writeFileSync(out, chart({ systems: j.systems, connections: j.settings.connections, rate: j.settings.fixedRate, machine: j.machine, memory: j.memory, date: j.generatedAt }));
  console.log(`wrote ${out}`);
}

// ---------------------------------------------------------------- main

async function main(): Promise<void> {
  const t0 = Date.now();
  const m = machine();
  console.log(
    `rategate bench${QUICK ? ' (quick)' : ''}: ${m.cpu}, ${m.cores} cores, Node ${m.node}; ${ROUNDS} round(s) of ${DURATION} s runs after a warm-up, ${CONNECTIONS} connections, fixed rate ${RATE}/s`,
  );
  const load1 = (m.loadavgAtStart as number[])[0]!;
  if (load1 > 0.7) note(`load average ${load1} at start: other processes are using the CPU; figures are noisier than on an idle machine`);
  CLI = build();
  mkdirSync(RESULTS, { recursive: true });

  let upstream: Server | null = null;
  let redisServer: Server | null = null;
  let memory: MemoryResult | null = null;
  let perClient: PerClientResult | null = null;
  const instructions: Partial<Record<SystemKey, InstructionsResult>> = {};
  const profiles: Partial<Record<'rategate-memory' | 'rategate-redis', ProfileSummary>> = {};
  try {
    redisServer = await startRedis();
    if (redisServer) {
      redisUrl = `redis://127.0.0.1:${redisServer.port}`;
      redisPid = redisServer.proc.pid;
      redis = new Redis(redisUrl, { lazyConnect: false, maxRetriesPerRequest: 1 });
    } else note('no redis-server binary: Redis rows skipped');
    upstream = await startUpstream();
    upstreamUrl = `http://127.0.0.1:${upstream.port}`;
    upstreamPid = upstream.proc.pid;
    FX = await fixtures(QUICK ? 20 : 50);
    console.log(`upstream ${upstreamUrl}; target GET /api/v1/statuses/${FX.statusId} (a public status, 200, ~1.3 kB JSON) with a user's bearer token`);

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
            const exit = server === null ? null : server.proc.child.exitCode ?? server.proc.child.signalCode;
            note(
              `${LABELS[k]}, round ${round + 1}: ${(err as Error).message.slice(0, 200)}` +
                (exit !== null && exit !== undefined ? ` — the server process had exited (${exit}); its last output: ${JSON.stringify(server!.proc.output().slice(-400))}` : ''),
            );
          }
        }
      }
    } finally {
      for (const s of up.values()) await stopServer(s);
    }
    pickBest();
    if (!SKIP.has('mixed')) {
      for (const k of ['direct', 'thin', 'rategate-memory', 'rategate-redis'] as const) if (want(k)) await benchMixed(k, upstream.port);
    }
    if (!SKIP.has('memory') && want('rategate-memory')) perClient = await benchPerClient();
    if (!SKIP.has('million') && want('rategate-memory')) memory = await benchMillion();
    if (!SKIP.has('clients')) for (const k of ['thin', 'rategate-memory', 'rategate-redis'] as const) if (want(k)) await benchManyClients(k);
    if (!SKIP.has('instructions')) {
      const usePerf = perfCountsInstructions();
      if (!usePerf && spawnSync('valgrind', ['--version']).error) note('instructions per request skipped: perf does not count instructions here and valgrind is not installed');
      else {
        if (!usePerf) note('perf stat cannot count instructions on this machine (no PMU in the VM): instructions per request come from callgrind');
        for (const k of ['thin', 'rategate-memory', 'rategate-redis'] as const) {
          if (!want(k) || unavailable(k) !== null) continue;
          try {
            const r = await benchInstructions(k, usePerf);
            if (r) instructions[k] = r;
          } catch (err) {
            note(`instructions per request, ${LABELS[k]}: ${(err as Error).message.slice(0, 200)}`);
          }
        }
      }
    } else if (QUICK) note('instructions per request skipped (--quick skips them: callgrind takes minutes; add --instructions)');
    if (!SKIP.has('profile')) {
      for (const k of ['rategate-memory', 'rategate-redis'] as const) {
        if (!want(k) || unavailable(k) !== null) continue;
        const s = await profileGateway(k);
        if (s) profiles[k] = s;
      }
    } else note('CPU profiles skipped (--skip profile; --quick skips them)');
  } finally {
    await stopServer(upstream);
    redis?.disconnect();
    await stopServer(redisServer);
  }

  m.loadavgAtEnd = os.loadavg().map((x) => +x.toFixed(2));
  const rs = ratios(perClient);
  console.log(`\n${table()}\n`);
  console.log(`${cpuTable()}\n`);
  const instr = Object.entries(instructions);
  if (instr.length > 0) {
    const thinI = instructions.thin?.mainThreadPerRequest ?? instructions.thin?.perRequest;
    console.log(`Instructions per forwarded request, gateway process (${instr[0]![1].tool}; 8 connections, one client):`);
    for (const [k, r] of instr) {
      const main = r.mainThreadPerRequest ?? r.perRequest;
      console.log(
        `  ${LABELS[k as SystemKey].padEnd(28)} all threads ${(r.perRequest / 1000).toFixed(0).padStart(6)} k, main thread ${(main / 1000).toFixed(0).padStart(6)} k` +
          `${thinI && k !== 'thin' ? `  (main thread ${(main / thinI).toFixed(2)} × bare forwarder)` : ''}`,
      );
    }
    console.log('');
  }
  if (perClient) {
    console.log(
      `memory per distinct client (bench/memory-per-client.ts, ${perClient.clients.toLocaleString('en')} clients, in-process after a full GC): ` +
        `${perClient.rssBytesPerClient} B of RSS, ${perClient.heapBytesPerClient} B of heap + external; after the windows and a sweep ${perClient.heapBytesPerClientAfterExpiry} B left`,
    );
  }
  for (const k of ['fastify', 'rategate-redis'] as const) {
    const r = results[k];
    if (r?.forwarded?.redisCallsPerRequest !== undefined) {
      const f = r.forwarded;
      const rj = r.rejected;
      console.log(
        `Redis per request, ${LABELS[k]}: forwarded ${f.redisScriptCallsPerRequest?.toFixed(3)} script calls (${f.redisCallsPerRequest!.toFixed(2)} commands incl. inside scripts), ` +
          `rejected ${rj?.redisScriptCallsPerRequest?.toFixed(3) ?? '—'} (${rj?.redisCallsPerRequest?.toFixed(2) ?? '—'})`,
      );
    }
  }
  for (const k of ORDER) if (results[k]?.mixed) console.log(`mixed seed traffic, ${LABELS[k]}: ${statusSummary(results[k]!.mixed!.statuses)}`);
  if (memory) {
    console.log(
      `memory, ${memory.clients.toLocaleString('en')} distinct clients through rategate memory: RSS ${memory.rssBeforeMB.toFixed(0)} → ${memory.rssAfterMB.toFixed(0)} MB ` +
        `(peak ${memory.rssPeakMB.toFixed(0)}; ≈ ${(((memory.rssAfterMB - memory.rssBeforeMB) * 2 ** 20) / memory.clients).toFixed(0)} bytes per client), ` +
        `heap used ${memory.heapUsedBeforeMB?.toFixed(0)} → ${memory.heapUsedAfterMB?.toFixed(0)} MB (no forced GC), ${memory.seconds.toFixed(0)} s at ${fmtInt(memory.rps)} req/s`,
    );
  }
  console.log('\nissue 14 goals (one run, interleaved rounds; "by CPU": the throughput ratio the CPU table predicts, total(b) / total(a)):');
  for (const r of rs) {
    const v = r.value === null ? 'n/a' : r.value.toFixed(r.name.includes('bytes') ? 0 : r.name.includes('commands') ? 3 : 2);
    const cpu = r.byCpu === undefined ? '' : r.byCpu === null ? '(by CPU: n/a)' : `(by CPU: ${r.byCpu.toFixed(2)})`;
    console.log(
      `  ${r.name.padEnd(62)} ${v.padStart(7)}  ${r.target.padEnd(12)} ${(r.pass === null ? `SKIP (${r.detail.slice(0, 80)})` : r.pass ? 'PASS' : 'MISS').padEnd(5)} ${cpu}`,
    );
  }
  const thin = results.thin?.forwarded?.rps;
  const fast = results.fastify?.forwarded?.rps;
  const ngx = results.nginx?.forwarded?.rps;
  const hap = results.haproxy?.forwarded?.rps;
  if (thin && fast) console.log(`  (reference: bare forwarder / fastify stack = ${(thin / fast).toFixed(2)})`);
  if (thin && ngx) console.log(`  (reference, not a goal: nginx / bare forwarder = ${(ngx / thin).toFixed(2)})`);
  if (thin && hap) console.log(`  (reference, not a goal: HAProxy / bare forwarder = ${(hap / thin).toFixed(2)})`);

  if (Object.keys(profiles).length > 0) {
    const md = [
      '# CPU profiles of the gateway (forwarded scenario)',
      '',
      `Generated by \`npm run bench\` on ${new Date().toISOString()} — ${m.cpu}, ${m.cores} cores, Node ${m.node}. Each gateway ran under`,
      `\`node --cpu-prof\` while autocannon sent \`GET /api/v1/statuses/:id\` with a user token (three matched rules) at ${CONNECTIONS}`,
      `connections for ${PROFILE_SEC} s after a 1 s warm-up. Self time is aggregated by function and location; compiled JS locations are`,
      'mapped back to `src/*.ts` through the source maps of `bench/.build/dist`. Re-summarize a profile with',
      '`npx tsx bench/top-profile.ts bench/.build/profiles/<gateway>/<file>.cpuprofile`.',
      '',
      ...Object.entries(profiles).map(([k, s]) => toMarkdown(LABELS[k as SystemKey], s)),
    ].join('\n');
    // The hand-written analysis below the marker (the Redis path's breakdown) survives a regeneration.
    const old = existsSync('bench/profile.md') ? readFileSync('bench/profile.md', 'utf8') : '';
    const kept = old.indexOf(PROFILE_MARKER);
    writeFileSync('bench/profile.md', kept >= 0 ? `${md}\n${old.slice(kept)}` : md);
    for (const [k, s] of Object.entries(profiles)) {
      console.log(`\ntop self time, ${LABELS[k as SystemKey]} (of ${(s.busyMs / 1000).toFixed(1)} s busy):`);
      s.functions.slice(0, 15).forEach((f, i) => console.log(`  ${String(i + 1).padStart(2)}. ${f.pct.toFixed(1).padStart(5)}%  ${f.name.slice(0, 40).padEnd(40)} ${f.location}`));
    }
    console.log('(full tables: bench/profile.md)');
  }

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
      loadGenerator: 'autocannon 8 (programmatic, child process) for fixed concurrency; bench/paced.ts (open-loop, raw sockets) for the fixed rate; bench/million.ts (raw sockets, pipelined) for distinct clients',
      target: 'GET /api/v1/statuses/:id of a public status (200, ~1.3 kB JSON), Authorization: Bearer <user token>',
      rejectedTarget: 'GET /api/v1/exhausted: limit 1 per hour per IP (nginx: 1r/m), exhausted during the warm-up',
      rategateConfig: BENCH_CONFIG,
      mixedConfig: SEED_CONFIG,
    },
    systems: results,
    rounds,
    memory,
    memoryPerClient: perClient,
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
  console.log(`\nwrote ${RESULTS}/${outName}.json and ${outName}.svg${Object.keys(profiles).length ? ' and bench/profile.md' : ''} in ${json.elapsedSec} s`);
  if (notes.length) console.log(`notes:\n${notes.map((n) => `  - ${n}`).join('\n')}`);
}

process.on('SIGINT', () => {
  killAll();
  process.exit(130);
});
process.on('exit', killAll);
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

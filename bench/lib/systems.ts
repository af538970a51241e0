/**
 * @module The processes under test: the build, the upstream, redis-server, the gateways and the peers, started and stopped.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { freePort, sleep, start, waitForPort, type Proc } from './procs.js';
import { BENCH_CONFIG, BUILD, HAPROXY, LABELS, note, REDIS_SYSTEMS, results, type SystemKey } from './settings.js';
import type { Fixtures } from './fixtures.js';
import type { SystemResult } from './types.js';

export function machine(): Record<string, unknown> {
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

/** Compiles src/ to bench/.build/dist with source maps (so profiles map back to src/*.ts), when stale. */
export function build(): string {
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
  const r = spawnSync(
    process.execPath,
    ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json', '--outDir', BUILD],
    { encoding: 'utf8' },
  );
  if (!existsSync(cli)) throw new Error(`tsc produced no ${cli}: ${r.stdout}${r.stderr}`);
  if (r.status !== 0)
    note(`tsc reported type errors in src/ (emitted anyway): ${(r.stdout + r.stderr).split('\n')[0]}`);
  if (existsSync('src/limiter/redis/lua'))
    cpSync('src/limiter/redis/lua', path.join(BUILD, 'limiter', 'redis', 'lua'), { recursive: true });
  return cli;
}

export interface Server {
  key: string;
  port: number;
  adminPort?: number;
  proc: Proc;
  /** Extra clean-up (temp dirs). */
  cleanup?: () => void;
}

/** What the runner learns at start-up (the build, the upstream, Redis, the fixtures) and every scenario reads. */
export const env = {
  cli: '',
  upstreamUrl: '',
  upstreamPid: 0,
  redisPid: null as number | null,
  redisUrl: null as string | null,
  redis: null as Redis | null,
  /** The Unix socket redis-server also listens on (the `rategate-redis-unix` system). */
  redisSocket: null as string | null,
  redisUnsupported: null as string | null,
  /** Set by the runner before any scenario runs. */
  fx: undefined as unknown as Fixtures,
};

export async function startUpstream(): Promise<Server> {
  const port = await freePort();
  const proc = start('upstream', process.execPath, [env.cli, 'upstream', '--listen', `127.0.0.1:${port}`]);
  await waitForPort(proc, port);
  return { key: 'upstream', port, proc };
}

export async function startRedis(): Promise<Server | null> {
  if (spawnSync('redis-server', ['--version']).error) return null;
  const port = await freePort();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-bench-redis-'));
  env.redisSocket = path.join(dir, 'redis.sock');
  const proc = start('redis-server', 'redis-server', [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--unixsocket',
    env.redisSocket,
    '--unixsocketperm',
    '700',
    '--save',
    '',
    '--appendonly',
    'no',
  ]);
  await waitForPort(proc, port);
  return { key: 'redis', port, proc, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** How a gateway is started: under `--cpu-prof`, with its access log on, under a wrapper (valgrind). */
export interface GatewayLaunch {
  /** `--cpu-prof` into this directory. */
  readonly cpuProfDir?: string;
  /** The default `info` level (one JSON line per request, to a temp file) instead of warn. */
  readonly accessLog?: boolean;
  /** A command to run node under (valgrind and its options). */
  readonly wrap?: readonly string[];
  /** `wrap` replaces node and cli.js altogether (bench/deferred-memory.mjs). */
  readonly launcher?: boolean;
  /** Options for node itself (`--perf-basic-prof`). */
  readonly nodeFlags?: readonly string[];
  /** More environment for the gateway (the OTEL_* variables of a traced row). */
  readonly env?: Readonly<Record<string, string>>;
  /** How long it may take to listen under `wrap` (default 300 s; loading the tracing SDK under valgrind takes longer). */
  readonly startMs?: number;
}

/** The command and arguments that run node with `nodeArgs` under `wrap` (nothing: node itself). */
export function nodeCommand(wrap: readonly string[], nodeArgs: readonly string[]): [string, string[]] {
  return wrap.length > 0
    ? [wrap[0]!, [...wrap.slice(1), process.execPath, ...nodeArgs]]
    : [process.execPath, [...nodeArgs]];
}

export async function startGateway(key: string, config: string, store: string, o: GatewayLaunch = {}): Promise<Server> {
  const {
    cpuProfDir,
    accessLog = false,
    wrap = [],
    launcher = false,
    nodeFlags = [],
    env: moreEnv = {},
    startMs = 300_000,
  } = o;
  const port = await freePort();
  const adminPort = await freePort();
  const args = [
    ...nodeFlags,
    ...(cpuProfDir !== undefined ? ['--cpu-prof', `--cpu-prof-dir=${cpuProfDir}`] : []),
    env.cli,
    'serve',
    '--config',
    config,
    '--listen',
    `127.0.0.1:${port}`,
    '--admin-listen',
    `127.0.0.1:${adminPort}`,
    '--upstream',
    env.upstreamUrl,
    '--store',
    store,
  ];
  // Access log off (warn level), as nginx's and fastify's are; or on, written to a file as to a log volume.
  const logFile = accessLog
    ? path.join(mkdtempSync(path.join(os.tmpdir(), 'rategate-bench-log-')), 'access.log')
    : undefined;
  const [cmd, argv] = launcher
    ? [wrap[0]!, [...wrap.slice(1), ...args.filter((a) => a !== env.cli)]]
    : nodeCommand(wrap, args);
  const proc = start(key, cmd, argv, { RATEGATE_LOG_LEVEL: accessLog ? 'info' : 'warn', ...moreEnv }, logFile);
  // Under valgrind, Node takes a minute or more to start.
  await waitForPort(proc, port, wrap.length > 0 && !launcher ? startMs : 30_000);
  if (store !== 'memory') {
    const until = Date.now() + 10_000;
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${adminPort}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      if (Date.now() > until) {
        await proc.stop();
        throw new Error(`${key}: /readyz not 200 within 10 s`);
      }
      await sleep(100);
    }
  }
  return {
    key,
    port,
    adminPort,
    proc,
    ...(logFile ? { cleanup: () => rmSync(path.dirname(logFile), { recursive: true, force: true }) } : {}),
  };
}

/** The thin forwarder; under `wrap` (valgrind) with `nodeFlags` for the instruction counts; `extra`: its own flags (`--gateway-headers`). */
export async function startThin(
  wrap: readonly string[] = [],
  nodeFlags: readonly string[] = [],
  extra: readonly string[] = [],
): Promise<Server> {
  const port = await freePort();
  const [cmd, argv] = nodeCommand(wrap, [
    ...nodeFlags,
    '--import',
    'tsx',
    'bench/thin-forwarder.ts',
    '--listen',
    `127.0.0.1:${port}`,
    '--upstream',
    env.upstreamUrl,
    ...extra,
  ]);
  const proc = start('thin', cmd, argv);
  await waitForPort(proc, port, wrap.length > 0 ? 300_000 : 30_000);
  return { key: 'thin', port, proc };
}

/** The fastify stack; `store` 'memory': @fastify/rate-limit's own in-process store instead of Redis. */
export async function startFastify(
  wrap: readonly string[] = [],
  nodeFlags: readonly string[] = [],
  store: 'redis' | 'memory' = 'redis',
): Promise<Server> {
  const port = await freePort();
  const [cmd, argv] = nodeCommand(wrap, [
    ...nodeFlags,
    '--import',
    'tsx',
    'bench/fastify-stack.ts',
    '--listen',
    `127.0.0.1:${port}`,
    '--upstream',
    env.upstreamUrl,
    ...(store === 'redis' ? ['--redis', env.redisUrl!] : []),
  ]);
  const proc = start('fastify', cmd, argv);
  await waitForPort(proc, port, wrap.length > 0 ? 300_000 : 30_000);
  return { key: 'fastify', port, proc };
}

export async function startNginx(): Promise<Server> {
  const port = await freePort();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-bench-nginx-'));
  const conf = readFileSync('bench/nginx.conf.tmpl', 'utf8')
    .replaceAll('{{DIR}}', dir)
    .replaceAll('{{PORT}}', String(port))
    .replaceAll('{{UPSTREAM_PORT}}', new URL(env.upstreamUrl).port);
  writeFileSync(path.join(dir, 'nginx.conf'), conf);
  const proc = start('nginx', 'nginx', [
    '-p',
    dir,
    '-c',
    path.join(dir, 'nginx.conf'),
    '-e',
    path.join(dir, 'error.log'),
  ]);
  await waitForPort(proc, port);
  return { key: 'nginx', port, proc, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export async function startHaproxy(): Promise<Server> {
  const port = await freePort();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-bench-haproxy-'));
  const conf = readFileSync('bench/haproxy.cfg.tmpl', 'utf8')
    .replaceAll('{{DIR}}', dir)
    .replaceAll('{{PORT}}', String(port))
    .replaceAll('{{UPSTREAM_PORT}}', new URL(env.upstreamUrl).port);
  writeFileSync(path.join(dir, 'haproxy.cfg'), conf);
  // -db: stay in the foreground, so that the process the bench measures is the one serving.
  const proc = start('haproxy', HAPROXY!, ['-db', '-f', path.join(dir, 'haproxy.cfg')]);
  await waitForPort(proc, port);
  return { key: 'haproxy', port, proc, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export async function stopServer(s: Server | null | undefined): Promise<void> {
  if (!s) return;
  await s.proc.stop(s.key === 'nginx' ? 'SIGQUIT' : 'SIGTERM');
  s.cleanup?.();
}

export async function startSystem(key: SystemKey, config = BENCH_CONFIG): Promise<Server | null> {
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
      return startGateway(key, config, 'memory', { accessLog: true });
    case 'rategate-memory-deferred':
      return startGateway(key, config, 'memory', {
        wrap: [process.execPath, 'bench/deferred-memory.mjs', path.dirname(env.cli)],
        launcher: true,
      });
    case 'rategate-redis':
      return startGateway(key, config, env.redisUrl!);
    case 'rategate-redis-unix':
      return startGateway(key, config, `redis+unix://${env.redisSocket!}`);
  }
}

/** Why a system cannot run here, or null. */
export function unavailable(key: SystemKey): string | null {
  if (key === 'nginx' && spawnSync('nginx', ['-v']).error) return 'nginx not installed (apt-get install -y nginx)';
  if (key === 'haproxy' && HAPROXY === null)
    return 'HAProxy not installed (apt-get install -y haproxy): its row is missing';
  if (REDIS_SYSTEMS.has(key) && env.redisUrl === null) return 'no redis-server binary';
  if (key === 'rategate-redis' && env.redisUnsupported !== null) return env.redisUnsupported;
  return null;
}

/** Starts a system for the main scenarios; null with `results[key].skipped` set when it cannot run. */
export async function launch(key: SystemKey): Promise<Server | null | 'skipped'> {
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
      env.redisUnsupported =
        'the Redis store is not wired into src/limiter/factory.ts yet ("Redis stores are not available in this build yet")';
    }
    r.skipped =
      key === 'rategate-redis' && env.redisUnsupported !== null
        ? env.redisUnsupported
        : `failed to start: ${msg.slice(0, 300)}`;
    note(`${LABELS[key]}: skipped — ${r.skipped}`);
    return 'skipped';
  }
}

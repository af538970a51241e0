/**
 * @module The Redis harness: a real Redis (and a 3-master Redis Cluster) for tests.
 *
 * Where Redis comes from, in order: REDIS_URL (and REDIS_CLUSTER_NODES for a cluster) → a `redis-server`
 * binary on PATH started on free ports → a Docker engine through testcontainers. With none of them the
 * suite fails under CI=true (CI must not pass by skipping) and is skipped loudly otherwise.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { blockFixture } from './fixture.js';
import { freePort } from './servers.js';
import { eventually } from './eventually.js';

export interface RedisNode {
  host: string;
  port: number;
  url: string;
  /**
   * Kills the server (SIGKILL: no goodbye to clients), for fault tests. No-op for external servers. A
   * binary-backed node keeps its port meanwhile (a listener that resets every connection), so no
   * other test's server can take it before restart().
   */
  kill(): Promise<void>;
  /** Starts it again on the same port. */
  restart(): Promise<void>;
  /** SIGSTOP / SIGCONT: a hung host (connections stay open, nothing answers). No-op for external servers. */
  freeze(): void;
  thaw(): void;
}

export interface RedisHandle {
  /** How this Redis was obtained, for test output. */
  readonly source: 'env' | 'binary' | 'container';
  readonly url: string;
  readonly node: RedisNode;
  stop(): Promise<void>;
}

export interface ClusterHandle {
  readonly source: 'env' | 'binary';
  /** `redis-cluster://h:p,h:p,h:p`, as the gateway's store.url takes it. */
  readonly url: string;
  readonly nodes: readonly RedisNode[];
  stop(): Promise<void>;
}

/** Why Redis is not available here, or null when it is. Checked once, before suites are declared. */
export function redisUnavailableReason(): string | null {
  if (process.env.REDIS_URL) return null;
  if (hasRedisBinary()) return null;
  if (hasDockerEngine()) return null;
  return 'no REDIS_URL, no redis-server binary on PATH, and no Docker engine';
}

/**
 * For `describe.skipIf(skipRedis(…))`: true to skip. Under CI=true a missing Redis throws instead, so
 * the run fails rather than passing by skipping.
 */
export function skipRedis(what: string): boolean {
  const reason = redisUnavailableReason();
  if (!reason) return false;
  if (process.env.CI === 'true') throw new Error(`${what} needs Redis, and CI=true: ${reason}`);
  console.warn(`\n*** SKIPPING ${what}: ${reason} ***\n`);
  return true;
}

export function clusterUnavailableReason(): string | null {
  if (process.env.REDIS_CLUSTER_NODES) return null;
  if (hasRedisBinary()) return null;
  return 'no REDIS_CLUSTER_NODES and no redis-server binary on PATH (containers are not used for clusters)';
}

export function skipCluster(what: string): boolean {
  const reason = clusterUnavailableReason();
  if (!reason) return false;
  if (process.env.CI === 'true') throw new Error(`${what} needs a Redis Cluster, and CI=true: ${reason}`);
  console.warn(`\n*** SKIPPING ${what}: ${reason} ***\n`);
  return true;
}

/**
 * For `it.skipIf(…)` on a test that kills and restarts its Redis: true (with the reason printed) when
 * `startRedis()` would not give it a redis-server of its own to kill, i.e. REDIS_URL names a shared
 * server, or there is no binary (a container is stopped, not restarted on its port).
 */
/** For a test that kills its Redis (and need not restart it): skipped, loudly, when REDIS_URL names a server it must not kill. */
export function skipIfExternalRedis(what: string): boolean {
  if (!process.env.REDIS_URL) return false;
  console.warn(`\n*** SKIPPING ${what}: REDIS_URL names a server this test must not kill ***\n`);
  return true;
}

export function skipUnlessOwnRedis(what: string): boolean {
  const reason = process.env.REDIS_URL
    ? 'REDIS_URL names a server this test must not kill'
    : hasRedisBinary()
      ? null
      : 'no redis-server binary (a container cannot be restarted on its port)';
  if (reason === null) return false;
  console.warn(`\n*** SKIPPING ${what}: ${reason} ***\n`);
  return true;
}

let binaryChecked: boolean | undefined;
function hasRedisBinary(): boolean {
  binaryChecked ??= spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
  return binaryChecked;
}

function hasDockerEngine(): boolean {
  return spawnSync('docker', ['info'], { stdio: 'ignore', timeout: 5000 }).status === 0;
}

/**
 * A single Redis for one test file. `serverArgs` (e.g. `--requirepass`, `--user`) need the binary: with
 * them, REDIS_URL and containers are not used.
 */
/**
 * The block's own Redis (call it inside a `describe`): started before its tests, stopped after. The
 * handle reads through to the started one, so `redis.url` and `redis.node` work as a started handle's.
 */
export function redisFixture(serverArgs: string[] = []): RedisHandle {
  return blockFixture(
    () => startRedis(serverArgs),
    (h) => h.stop(),
    'Redis',
  );
}

/** The block's own Redis Cluster, as `redisFixture`. */
export function clusterFixture(opts: { password?: string } = {}): ClusterHandle {
  return blockFixture(
    () => startRedisCluster(opts),
    (h) => h.stop(),
    'Redis Cluster',
  );
}

export async function startRedis(serverArgs: string[] = []): Promise<RedisHandle> {
  const envUrl = process.env.REDIS_URL;
  if (envUrl && serverArgs.length === 0) {
    const u = new URL(envUrl);
    const node = externalNode(u.hostname, Number(u.port || 6379));
    return { source: 'env', url: envUrl, node, stop: async () => {} };
  }
  if (hasRedisBinary()) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-redis-'));
    const node = await startBinaryNode(dir, serverArgs);
    return {
      source: 'binary',
      url: node.url,
      node,
      stop: async () => {
        await node.stop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  if (hasDockerEngine()) return startContainer();
  throw new Error(`Redis unavailable: ${redisUnavailableReason()}`);
}

/**
 * A 3-master Redis Cluster (no replicas), all 16384 slots covered. With `password`, every node requires
 * it (the binary only: REDIS_CLUSTER_NODES is not used then).
 */
export async function startRedisCluster(opts: { password?: string } = {}): Promise<ClusterHandle> {
  const envNodes = process.env.REDIS_CLUSTER_NODES;
  if (envNodes && opts.password === undefined) {
    const nodes = envNodes.split(',').map((hp) => {
      const [h, p] = hp.split(':');
      return externalNode(h ?? '127.0.0.1', Number(p));
    });
    return { source: 'env', url: `redis-cluster://${envNodes}`, nodes, stop: async () => {} };
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-cluster-'));
  const auth = opts.password === undefined ? [] : ['--requirepass', opts.password, '--masterauth', opts.password];
  const nodes: (RedisNode & { stop(): Promise<void> })[] = [];
  for (let i = 0; i < 3; i++) {
    nodes.push(
      await startBinaryNode(dir, ['--cluster-enabled', 'yes', '--cluster-node-timeout', '2000', ...auth], (port) => [
        '--cluster-config-file',
        path.join(dir, `nodes-${port}.conf`),
      ]),
    );
  }
  await formCluster(nodes, opts.password);
  return {
    source: 'binary',
    url: `redis-cluster://${nodes.map((n) => `${n.host}:${n.port}`).join(',')}`,
    nodes,
    stop: async () => {
      await Promise.all(nodes.map((n) => n.stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function externalNode(host: string, port: number): RedisNode {
  return {
    host,
    port,
    url: `redis://${host}:${port}`,
    kill: async () => {},
    restart: async () => {},
    freeze: () => {},
    thaw: () => {},
  };
}

export async function startBinaryNode(
  dir: string,
  extra: string[],
  perPort: (port: number) => string[] = () => [],
): Promise<RedisNode & { stop(): Promise<void> }> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  let holder: net.Server | undefined;
  const launch = async () => {
    const c = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir,
        ...extra,
        ...perPort(port),
      ],
      { stdio: 'ignore' },
    );
    child = c;
    // Our own server must be the one answering: one that failed to bind exits, and another test's may answer.
    await waitForPing('127.0.0.1', port, 10_000, () => c.exitCode === null && c.signalCode === null);
  };
  const killChild = async () => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve());
      c.kill('SIGKILL');
    });
  };
  const release = async () => {
    const h = holder;
    holder = undefined;
    if (h) await new Promise<void>((resolve) => h.close(() => resolve()));
  };
  await launch();
  return {
    host: '127.0.0.1',
    port,
    url: `redis://127.0.0.1:${port}`,
    kill: async () => {
      await killChild();
      if (holder) return;
      // Hold the port while the server is down: clients see their connections reset, as with a dead
      // server, and the port cannot go to another test's server started meanwhile.
      const h = net.createServer((socket) => socket.resetAndDestroy());
      await new Promise<void>((resolve) => {
        h.once('error', () => resolve()); // already taken: nothing to hold
        h.listen(port, '127.0.0.1', () => {
          holder = h;
          resolve();
        });
      });
    },
    restart: async () => {
      await killChild();
      await release();
      await launch();
    },
    freeze: () => void child?.kill('SIGSTOP'),
    thaw: () => void child?.kill('SIGCONT'),
    stop: async () => {
      // A frozen server must be woken to die promptly on every platform.
      child?.kill('SIGCONT');
      await killChild();
      await release();
    },
  };
}

/** Sends PING until the server answers PONG; fails at once when `alive` says the server is gone. */
export async function waitForPing(
  host: string,
  port: number,
  timeoutMs: number,
  alive: () => boolean = () => true,
): Promise<void> {
  const up = await eventually(
    async () => {
      if (!alive()) return 'exited';
      return (await pong(host, port)) ? 'up' : false;
    },
    { what: `redis on ${host}:${port} answering PING`, withinMs: timeoutMs, everyMs: 50 },
  );
  if (up === 'exited') throw new Error(`redis-server on ${host}:${port} exited before answering (was the port taken?)`);
}

/** One PING: true when the server answers (a server with a password answers NOAUTH: it is up all the same). */
function pong(host: string, port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const s = net.connect(port, host);
    s.setTimeout(500);
    s.once('connect', () => s.write('PING\r\n'));
    s.once('data', (d) => {
      s.destroy();
      resolve(d.toString().startsWith('+PONG') || d.toString().startsWith('-NOAUTH'));
    });
    s.once('error', () => resolve(false));
    s.once('timeout', () => {
      s.destroy();
      resolve(false);
    });
  });
}

/** Splits the slots over the nodes, introduces them to each other, and waits for cluster_state:ok everywhere. */
async function formCluster(nodes: RedisNode[], password?: string): Promise<void> {
  const clients = nodes.map(
    (n) =>
      new Redis({ host: n.host, port: n.port, lazyConnect: false, ...(password === undefined ? {} : { password }) }),
  );
  try {
    const per = Math.ceil(16384 / nodes.length);
    await Promise.all(
      clients.map((c, i) =>
        c.call('CLUSTER', 'ADDSLOTSRANGE', String(i * per), String(Math.min(16383, (i + 1) * per - 1))),
      ),
    );
    for (const n of nodes.slice(1)) await clients[0]!.call('CLUSTER', 'MEET', n.host, String(n.port));
    await eventually(
      async () => {
        const infos = await Promise.all(clients.map((c) => c.call('CLUSTER', 'INFO') as Promise<string>));
        const slots = await Promise.all(clients.map((c) => c.call('CLUSTER', 'SLOTS') as Promise<unknown[]>));
        return infos.every((i) => i.includes('cluster_state:ok')) && slots.every((s) => s.length === nodes.length)
          ? true
          : infos.join(' | ');
      },
      {
        what: 'the cluster converged (cluster_state:ok, every slot range known everywhere)',
        withinMs: 20_000,
        everyMs: 100,
        until: (v) => v === true,
      },
    );
  } finally {
    clients.forEach((c) => c.disconnect());
  }
}

async function startContainer(): Promise<RedisHandle> {
  const { GenericContainer } = await import('testcontainers');
  const container = await new GenericContainer('redis:7-alpine').withExposedPorts(6379).start();
  const host = container.getHost();
  const port = container.getMappedPort(6379);
  const node: RedisNode = {
    host,
    port,
    url: `redis://${host}:${port}`,
    kill: async () => {
      await container.stop();
    },
    restart: async () => {
      throw new Error('restart is not supported for container-backed Redis');
    },
    freeze: () => {
      throw new Error('freeze is not supported for container-backed Redis');
    },
    thaw: () => {},
  };
  return { source: 'container', url: node.url, node, stop: async () => void (await container.stop()) };
}

/**
 * A bucket's stored state as the Lua scripts write it (three little-endian doubles, see lua/lib.lua),
 * or null when the key is absent; throws on any other value, so a layout change cannot pass unseen.
 */
export async function readBucketState(
  client: { getBuffer(key: string): Promise<Buffer | null> },
  key: string,
): Promise<[number, number, number] | null> {
  const raw = await client.getBuffer(key);
  if (raw === null) return null;
  if (raw.length !== 24) throw new Error(`${key}: ${raw.length}-byte value, expected 24 (three doubles)`);
  return [raw.readDoubleLE(0), raw.readDoubleLE(8), raw.readDoubleLE(16)];
}

/** EVALSHA/EVAL calls `client`'s Redis has executed so far: one per client round trip of a script. */
export async function scriptCalls(client: Redis): Promise<number> {
  const info = await client.info('commandstats');
  let n = 0;
  for (const m of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) n += Number(m[1]);
  return n;
}

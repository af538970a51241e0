/**
 * @module Redis high-availability set-ups for failover tests, from the `redis-server` binary on free
 * ports: a 3-master / 3-replica Redis Cluster with a short `cluster-node-timeout`, and a Sentinel group
 * (1 master, 1 replica, 3 sentinels, `redis-server --sentinel`). Each can say when Redis promoted a
 * replica, so a test measures the gateway's resume time from Redis's own promotion.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { startBinaryNode, waitForPing, type RedisNode } from './redis.js';
import { freePort } from './servers.js';
import { eventually } from './eventually.js';

type Node = RedisNode & { stop(): Promise<void> };

export interface ReplicatedCluster {
  /** `redis-cluster://…` with the masters as seeds. */
  readonly url: string;
  readonly masters: readonly Node[];
  /** The replica of each master, by the master's port. */
  readonly replicaOf: ReadonlyMap<number, Node>;
  /** Resolves with the time (Date.now()) `replica` answered ROLE as a master; polls every 20 ms. */
  promotedAt(replica: RedisNode, timeoutMs?: number): Promise<number>;
  stop(): Promise<void>;
}

/** A test's own client of a node the test may kill: its connection errors are the point, not news. */
const quiet = (c: Redis): Redis => c.on('error', () => {});

const ask = (n: RedisNode, password?: string): Redis =>
  quiet(
    new Redis({
      host: n.host,
      port: n.port,
      lazyConnect: false,
      maxRetriesPerRequest: 1,
      ...(password === undefined ? {} : { password }),
    }),
  );

/** 3 masters, each with one replica; all slots covered and every replica in sync before it resolves. */
export async function startReplicatedCluster(
  opts: { nodeTimeoutMs?: number; requireFullCoverage?: boolean } = {},
): Promise<ReplicatedCluster> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-ha-cluster-'));
  // cluster-require-full-coverage no: while a dead master's slots wait for their replica, the other
  // masters keep serving their own (with the default `yes`, every node answers CLUSTERDOWN meanwhile).
  const args = [
    '--cluster-enabled',
    'yes',
    '--cluster-node-timeout',
    String(opts.nodeTimeoutMs ?? 1_000),
    '--cluster-replica-validity-factor',
    '0',
    '--cluster-require-full-coverage',
    opts.requireFullCoverage === true ? 'yes' : 'no',
  ];
  const nodes: Node[] = [];
  for (let i = 0; i < 6; i++)
    nodes.push(
      await startBinaryNode(dir, args, (port) => ['--cluster-config-file', path.join(dir, `nodes-${port}.conf`)]),
    );
  const masters = nodes.slice(0, 3);
  const replicas = nodes.slice(3);
  const clients = nodes.map((n) => ask(n));
  try {
    const per = Math.ceil(16384 / 3);
    await Promise.all(
      masters.map((_, i) =>
        clients[i]!.call('CLUSTER', 'ADDSLOTSRANGE', String(i * per), String(Math.min(16383, (i + 1) * per - 1))),
      ),
    );
    for (const n of nodes.slice(1)) await clients[0]!.call('CLUSTER', 'MEET', n.host, String(n.port));
    const ids = await Promise.all(clients.slice(0, 3).map((c) => c.call('CLUSTER', 'MYID') as Promise<string>));
    await until(async () => {
      const known = (await clients[3]!.call('CLUSTER', 'NODES')) as string;
      return (
        ids.every((id) => known.includes(id)) &&
        (await Promise.all(clients.slice(4).map((c) => c.call('CLUSTER', 'NODES') as Promise<string>))).every((k) =>
          ids.every((id) => k.includes(id)),
        )
      );
    }, 'replicas to learn the masters');
    await Promise.all(replicas.map((_, i) => clients[3 + i]!.call('CLUSTER', 'REPLICATE', ids[i]!)));
    await until(async () => {
      const infos = await Promise.all(clients.map((c) => c.call('CLUSTER', 'INFO') as Promise<string>));
      const slots = (await clients[0]!.call('CLUSTER', 'SLOTS')) as unknown[][];
      const synced = await Promise.all(replicas.map((_, i) => clients[3 + i]!.info('replication')));
      return (
        infos.every((i) => i.includes('cluster_state:ok')) &&
        slots.length === 3 &&
        slots.every((s) => s.length === 4) &&
        synced.every((s) => s.includes('master_link_status:up'))
      );
    }, 'the cluster to converge with a replica per master');
  } finally {
    clients.forEach((c) => c.disconnect());
  }
  return {
    url: `redis-cluster://${masters.map((n) => `${n.host}:${n.port}`).join(',')}`,
    masters,
    replicaOf: new Map(masters.map((m, i) => [m.port, replicas[i]!])),
    promotedAt: (replica, timeoutMs) => roleMasterAt(replica, undefined, timeoutMs),
    stop: async () => {
      await Promise.all(nodes.map((n) => n.stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface SentinelGroup {
  /** `redis-sentinel://[:MASTER_PASSWORD@]s1,s2,s3/NAME`. */
  readonly url: string;
  readonly name: string;
  readonly master: Node;
  readonly replica: Node;
  readonly sentinels: readonly { readonly port: number; stop(): Promise<void> }[];
  promotedAt(replica: RedisNode, timeoutMs?: number): Promise<number>;
  /**
   * Subscribes now to a sentinel's +switch-master (the moment Sentinel names the new master, after it
   * has seen the replica take the role); resolves with the time of the first one.
   */
  watchSwitch(): Promise<{ readonly at: Promise<number> }>;
  /** ROLE of a data node: 'master' or 'slave'. */
  role(node: RedisNode): Promise<string>;
  stop(): Promise<void>;
}

/**
 * A master, its replica, and 3 sentinels (quorum 2, down-after 1 s). `password`: the data nodes'
 * (requirepass, masterauth, and the sentinels' auth-pass); `sentinelPassword`: the sentinels' own.
 */
export async function startSentinelGroup(
  opts: { password?: string; sentinelPassword?: string } = {},
): Promise<SentinelGroup> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-ha-sentinel-'));
  const name = 'rgmaster';
  const auth = opts.password === undefined ? [] : ['--requirepass', opts.password, '--masterauth', opts.password];
  const master = await startBinaryNode(dir, auth);
  const replica = await startBinaryNode(dir, [...auth, '--replicaof', master.host, String(master.port)]);
  const rc = ask(replica, opts.password);
  try {
    await until(async () => (await rc.info('replication')).includes('master_link_status:up'), 'the replica to sync');
  } finally {
    rc.disconnect();
  }
  const sentinels: { port: number; stop(): Promise<void> }[] = [];
  for (let i = 0; i < 3; i++) {
    const port = await freePort();
    const conf = path.join(dir, `sentinel-${port}.conf`);
    writeFileSync(
      conf,
      [
        `port ${port}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `sentinel monitor ${name} ${master.host} ${master.port} 2`,
        `sentinel down-after-milliseconds ${name} 1000`,
        `sentinel failover-timeout ${name} 4000`,
        ...(opts.password === undefined ? [] : [`sentinel auth-pass ${name} ${opts.password}`]),
        ...(opts.sentinelPassword === undefined
          ? []
          : [`requirepass ${opts.sentinelPassword}`, `sentinel sentinel-pass ${opts.sentinelPassword}`]),
        '',
      ].join('\n'),
    );
    const child: ChildProcess = spawn('redis-server', [conf, '--sentinel'], { stdio: 'ignore' });
    await waitForPing('127.0.0.1', port, 10_000, () => child.exitCode === null && child.signalCode === null);
    sentinels.push({
      port,
      stop: () =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.kill('SIGKILL');
        }),
    });
  }
  // Every sentinel must know the replica and the other sentinels before a failover can be agreed on.
  const sc = sentinels.map((s) =>
    quiet(
      new Redis({
        host: '127.0.0.1',
        port: s.port,
        ...(opts.sentinelPassword === undefined ? {} : { password: opts.sentinelPassword }),
      }),
    ),
  );
  try {
    await until(async () => {
      const views = await Promise.all(sc.map((c) => c.call('SENTINEL', 'MASTER', name) as Promise<string[]>));
      return views.every(
        (v) => Number(v[v.indexOf('num-slaves') + 1]) >= 1 && Number(v[v.indexOf('num-other-sentinels') + 1]) >= 2,
      );
    }, 'the sentinels to discover each other and the replica');
  } finally {
    sc.forEach((c) => c.disconnect());
  }
  const creds = opts.password === undefined ? '' : `:${encodeURIComponent(opts.password)}@`;
  return {
    url: `redis-sentinel://${creds}${sentinels.map((s) => `127.0.0.1:${s.port}`).join(',')}/${name}`,
    name,
    master,
    replica,
    sentinels,
    promotedAt: (r, timeoutMs) => roleMasterAt(r, opts.password, timeoutMs),
    watchSwitch: async () => {
      const sub = quiet(
        new Redis({
          host: '127.0.0.1',
          port: sentinels[0]!.port,
          ...(opts.sentinelPassword === undefined ? {} : { password: opts.sentinelPassword }),
        }),
      );
      await sub.subscribe('+switch-master');
      // Wrapped: a promise returned from an async function would be waited for.
      return {
        at: new Promise<number>((resolve) => {
          sub.once('message', () => {
            resolve(Date.now());
            sub.disconnect();
          });
        }),
      };
    },
    role: async (n) => {
      const c = ask(n, opts.password);
      try {
        return String(((await c.call('ROLE')) as unknown[])[0]);
      } finally {
        c.disconnect();
      }
    },
    stop: async () => {
      await Promise.all(sentinels.map((s) => s.stop()));
      await Promise.all([master.stop(), replica.stop()]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function roleMasterAt(node: RedisNode, password: string | undefined, timeoutMs = 20_000): Promise<number> {
  const c = new Redis({
    host: node.host,
    port: node.port,
    maxRetriesPerRequest: 1,
    ...(password === undefined ? {} : { password }),
  });
  c.on('error', () => {});
  try {
    let at = 0;
    await until(
      async () => {
        const role = (await c.call('ROLE')) as unknown[];
        at = Date.now();
        return role[0] === 'master';
      },
      `${node.port} to be promoted`,
      timeoutMs,
      20,
    );
    return at;
  } finally {
    c.disconnect();
  }
}

/** `eventually` as these set-ups ask it: a throw is a node still starting or a command refused while the cluster forms. */
async function until(check: () => Promise<boolean>, what: string, withinMs = 20_000, everyMs = 50): Promise<void> {
  await eventually(check, { what, withinMs, everyMs, until: (ok) => ok });
}

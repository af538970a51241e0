/**
 * @module Connection setup for the Redis store: one ioredis client (single node or cluster) built from
 * a parsed store URL, with the options that keep a dead Redis from holding requests.
 *
 * The offline queue is off, so while Redis is unreachable calls fail at once instead of queueing; a
 * command in flight when the connection drops fails instead of being replayed late. Reconnection is
 * ioredis's business and happens by itself.
 *
 * Failover (SPEC §6: decisions resume within 2 s of Redis's promotion): ioredis's own retries are few
 * and short (more would outlast `store.timeout` and report a dead node as a timeout), so a failure
 * reaches the fault policy within the bound with its true reason; a cluster's slot map is refreshed
 * every second and at once after a failure (topology.ts), each refresh bounded well below the goal
 * so that a frozen node cannot hold it; a Sentinel client is kept on the announced master by
 * SentinelWatch (+switch-master on every sentinel: a frozen master never closes the connection, so
 * waiting for a connection error would wait forever; ioredis's own failoverDetector can end the client
 * for good) and reconnects on READONLY (a demoted master).
 */
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { StoreError } from '../errors.js';
import type { StoreUrl } from '../../config/store-url.js';

export type RedisClient = Redis | Cluster;

export interface ConnectOptions {
  /** TCP connect timeout for (re)connection attempts; requests never wait for it. */
  readonly connectTimeoutMs: number;
  /** The store call bound: a cluster's slot refresh is given a few times this long. */
  readonly timeoutMs: number;
  /** The sentinels' own password (`store.sentinelPassword`), when they require one. */
  readonly sentinelPassword?: string;
  /** Sentinel: maps a master address a lagging sentinel may still give to its replacement (sentinel-watch.ts). */
  readonly natMap?: (key: string) => { host: string; port: number } | null;
  /**
   * A subscriber: ioredis's own resubscription after a reconnect is off (its SUBSCRIBE's failure, on a
   * connection that closed again at once, is a promise nobody catches: an unhandled rejection ends the
   * process). The owner subscribes on every `ready` instead, catching (guard/redis-state.ts).
   */
  readonly subscriber?: boolean;
}

/** How often a cluster's slot map is refreshed when nothing fails. */
export const SLOTS_REFRESH_MS = 1_000;

/**
 * The bound of one slot-map query (CLUSTER SLOTS on one node over a fresh connection; a frozen node is
 * then skipped for the next): two store timeouts, at least 200 ms (a loaded machine), at most 500 ms
 * (a refresh that meets the frozen node first must still leave the 2 s goal room).
 */
export function slotsRefreshTimeout(timeoutMs: number): number {
  return Math.min(500, Math.max(200, 2 * timeoutMs));
}

/**
 * ioredis auto-pipelining stays off: bench/redis-store.ts measured no throughput gain from it and about
 * twice the p99 latency, and batching (batcher.ts) does what it would and more. It would also break the
 * batch command on a cluster, which it routes by the first argument (the key count).
 */
const AUTO_PIPELINING = false;

/** A client for `url`, not yet connected (call `connect()`); credentials, db and TLS come from the URL. */
export function createRedisClient(url: Exclude<StoreUrl, { kind: 'memory' }>, opts: ConnectOptions): RedisClient {
  // Reconnect quickly but without hammering a dead server; the breaker, not this, keeps requests fast.
  const retry = (times: number): number => Math.min(times * 100, 1_000);
  const auth: RedisOptions = {};
  if (url.username !== undefined) auth.username = url.username;
  if (url.password !== undefined) auth.password = url.password;
  if (url.tls) auth.tls = {};
  if (url.kind === 'redis-cluster') {
    const clusterOptions: ClusterOptions = {
      lazyConnect: true,
      enableOfflineQueue: false,
      enableAutoPipelining: AUTO_PIPELINING,
      clusterRetryStrategy: retry,
      redisOptions: { ...auth, connectTimeout: opts.connectTimeoutMs, maxRetriesPerRequest: 0 },
      slotsRefreshTimeout: slotsRefreshTimeout(opts.timeoutMs),
      slotsRefreshInterval: SLOTS_REFRESH_MS,
      // Retries well inside the bound, and few of them, so that a failure comes back before the deadline
      // with its own reason (not as a timeout): a closed connection (a node restarting; ioredis refreshes
      // the slot map meanwhile) and TRYAGAIN (a slot migrating) wait a fifth of it; CLUSTERDOWN is not
      // retried (coverage comes back by a promotion, which takes seconds; redis.ts refreshes the map).
      retryDelayOnFailover: Math.max(1, Math.floor(opts.timeoutMs / 5)),
      retryDelayOnClusterDown: 0,
      retryDelayOnTryAgain: Math.max(1, Math.floor(opts.timeoutMs / 5)),
      retryDelayOnMoved: 0,
      maxRedirections: 3,
    };
    return new Cluster(
      url.nodes.map((n) => ({ host: n.host, port: n.port })),
      clusterOptions,
    );
  }
  const where: RedisOptions =
    url.kind === 'redis'
      ? url.socket !== undefined
        ? { path: url.socket }
        : { host: url.node.host, port: url.node.port }
      : {
          sentinels: url.sentinels.map((n) => ({ host: n.host, port: n.port })),
          name: url.name,
          role: 'master',
          ...(opts.sentinelPassword !== undefined ? { sentinelPassword: opts.sentinelPassword } : {}),
          ...(url.tls ? { enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
          sentinelCommandTimeout: slotsRefreshTimeout(opts.timeoutMs),
          sentinelRetryStrategy: retry,
          // Off: on +switch-master it ends the connector even mid-resolution, which ends the client for
          // good (no reconnection ever). SentinelWatch (sentinel-watch.ts) follows the switch instead.
          failoverDetector: false,
          ...(opts.natMap !== undefined ? { natMap: opts.natMap as NonNullable<RedisOptions['natMap']> } : {}),
          // While the master is gone, ask the sentinels again soon: the new master is named ~1 s after
          // the promotion, and a 1 s back-off would add up to as much again.
          retryStrategy: (times: number) => Math.min(times * 50, 250),
          // On +switch-master the old connection is ended; a frozen master never closes its side, so
          // do not wait the default 2 s before dropping it.
          disconnectTimeout: 100,
        };
  return new Redis({
    ...auth,
    ...(opts.subscriber === true ? { autoResubscribe: false } : {}),
    db: url.db,
    // A demoted master answers writes with READONLY: reconnect (to the master the sentinels name), do
    // not resend (the call has failed already and the fault policy decided it).
    reconnectOnError: (err) => (/^READONLY\b/.test(err.message) ? 1 : false),
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    enableAutoPipelining: AUTO_PIPELINING,
    connectTimeout: opts.connectTimeoutMs,
    retryStrategy: retry,
    ...where,
  });
}

/** Resolves once `client` is ready (cluster: slots known); rejects with a connection StoreError after `waitMs`. */
export function whenReady(client: RedisClient, waitMs: number, lastError: () => Error | undefined): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const onReady = (): void => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      client.off('ready', onReady);
      const err = lastError();
      reject(new StoreError('connection', `store not connected after ${waitMs} ms${err ? `: ${err.message}` : ''}`));
    }, waitMs);
    client.once('ready', onReady);
  });
}

export function isCluster(client: RedisClient): client is Cluster {
  return client instanceof Cluster;
}

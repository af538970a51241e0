/**
 * @module Connection setup for the Redis store: one ioredis client (single node or cluster) built from
 * a parsed store URL, with the options that keep a dead Redis from holding requests.
 *
 * The offline queue is off, so while Redis is unreachable calls fail at once instead of queueing; a
 * command in flight when the connection drops fails instead of being replayed late. Reconnection is
 * ioredis's business and happens by itself.
 */
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { StoreError } from './errors.js';
import type { StoreUrl } from '../config/store-url.js';

export type RedisClient = Redis | Cluster;

export interface ConnectOptions {
  /** TCP connect timeout for (re)connection attempts; requests never wait for it. */
  readonly connectTimeoutMs: number;
  /** The store call bound: a cluster's slot refresh is given at least this long. */
  readonly timeoutMs: number;
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
      slotsRefreshTimeout: Math.max(1_000, opts.timeoutMs),
      // Redirect and failover retries happen inside ioredis; the store's deadline still bounds the call.
      retryDelayOnFailover: 50,
      retryDelayOnClusterDown: 50,
      retryDelayOnTryAgain: 50,
    };
    return new Cluster(
      url.nodes.map((n) => ({ host: n.host, port: n.port })),
      clusterOptions,
    );
  }
  return new Redis({
    ...auth,
    ...(url.socket !== undefined ? { path: url.socket } : { host: url.node.host, port: url.node.port }),
    db: url.db,
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    enableAutoPipelining: AUTO_PIPELINING,
    connectTimeout: opts.connectTimeoutMs,
    retryStrategy: retry,
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

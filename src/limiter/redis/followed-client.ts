/**
 * @module A connection off the request path (the guard state's, the fleet's) that stays on the master a
 * Sentinel group announces, as the counter store's does (sentinel-watch.ts).
 */
import type { Redis } from 'ioredis';
import type { StoreUrl } from '../../config/store-url.js';
import { createRedisClient, type RedisClient } from './connection.js';
import { sentinelWatchFor, type SentinelWatch } from './sentinel-watch.js';

export interface FollowedClientOptions {
  /** Bound of each call (the store timeout, or the caller's own). */
  readonly timeoutMs: number;
  /** The sentinels' own password (`store.sentinelPassword`), as the counter store is given it. */
  readonly sentinelPassword?: string | null | undefined;
  /** A subscriber: its owner subscribes on every `ready` (connection.ts). */
  readonly subscriber?: boolean;
}

/** A client for `url`; a Sentinel-managed one is kept on the announced master by a watch added to `watches`. */
export function connectFollowed(
  url: Exclude<StoreUrl, { kind: 'memory' }>,
  opts: FollowedClientOptions,
  watches: SentinelWatch[],
): RedisClient {
  const watch = sentinelWatchFor(url, opts.sentinelPassword);
  const client = createRedisClient(url, {
    connectTimeoutMs: 2_000,
    timeoutMs: opts.timeoutMs,
    subscriber: opts.subscriber === true,
    ...(opts.sentinelPassword != null ? { sentinelPassword: opts.sentinelPassword } : {}),
    ...(watch !== undefined ? { natMap: watch.map } : {}),
  });
  if (watch !== undefined) {
    watch.follow(client as Redis);
    watches.push(watch);
  }
  return client;
}

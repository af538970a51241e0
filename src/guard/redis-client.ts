/**
 * @module The shared guard state's Redis connections (redis-state.ts), and the options they are made from.
 */
import type { StoreUrl } from '../config/store-url.js';
import type { RedisClient } from '../limiter/redis/connection.js';
import { connectFollowed } from '../limiter/redis/followed-client.js';
import type { SentinelWatch } from '../limiter/redis/sentinel-watch.js';

export interface RedisGuardOptions {
  readonly url: string;
  readonly prefix: string;
  /** Bound of every call on the request path (the store timeout). */
  readonly timeoutMs: number;
  /** The sentinels' own password (`store.sentinelPassword`), as the counter store is given it. */
  readonly sentinelPassword?: string | null;
  /** How often a following replica polls (default 250 ms: changes apply within 1 s with room to spare). */
  readonly pollMs?: number;
  readonly now?: () => number;
}

/** The bound of the calls off the request path. */
export const CALL_MS = 2_000;

/** A client for `url`, kept on a Sentinel group's announced master by a watch added to `watches`. */
export function connectGuardClient(
  url: Exclude<StoreUrl, { kind: 'memory' }>,
  opts: RedisGuardOptions,
  watches: SentinelWatch[],
  subscriber = false,
): RedisClient {
  return connectFollowed(
    url,
    { timeoutMs: opts.timeoutMs, sentinelPassword: opts.sentinelPassword, subscriber },
    watches,
  );
}

/** Resolves once `client` is connected, or after `waitMs` either way. */
export function readyWithin(client: RedisClient, waitMs: number): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      client.off('ready', done);
      resolve();
    };
    const timer = setTimeout(done, waitMs);
    client.once('ready', done);
  });
}

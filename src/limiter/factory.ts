/**
 * @module Builds the Store that `store.url` names: memory; or Redis / Redis Cluster behind the fault
 * policy (timeouts, circuit breaker, onError) and the local cache of blocked buckets.
 */
import type { Config } from '../config/types.js';
import type { Metrics } from '../metrics.js';
import { createBlockedCacheStore } from './blocked.js';
import { MemoryStore } from './memory.js';
import { createRedisStore } from './redis.js';
import { createResilientStore } from './resilient.js';
import type { Store } from './types.js';

export interface StoreHandle {
  readonly store: Store;
  /** `memory`, `redis` or `redis-cluster`, for the startup line and /readyz. */
  readonly kind: 'memory' | 'redis' | 'redis-cluster';
  /** Does the store answer now? (A bounded ping; always true for memory.) /readyz and rategate_store_up. */
  reachable(): Promise<boolean>;
  /** True while decisions are made by the fault policy (onError) instead of the store. */
  fallbackActive(): boolean;
}

export interface StoreFactoryOptions {
  /** Tests only: the memory store's clock, or the Redis scripts' clock override. */
  now?: () => number;
  /** How long start-up waits for a first Redis connection before going on under the fault policy. */
  connectWaitMs?: number;
}

export async function createStoreFor(storeConfig: Config['store'], metrics: Metrics, opts: StoreFactoryOptions = {}): Promise<StoreHandle> {
  if (storeConfig.url === 'memory') {
    const store = new MemoryStore(opts.now ? { now: opts.now } : {});
    return { store, kind: 'memory', reachable: async () => true, fallbackActive: () => false };
  }
  const redis = createRedisStore({
    url: storeConfig.url,
    prefix: storeConfig.prefix,
    timeoutMs: storeConfig.timeout,
    ...(opts.now ? { now: opts.now } : {}),
  });
  const resilient = createResilientStore(redis, {
    fallback: new MemoryStore(opts.now ? { now: opts.now } : {}),
    onEvent: (e) => {
      // Store latency is measured once, around the whole decision, by the request path.
      if (e.type === 'error') metrics.storeErrors.labels(e.reason).inc();
      else if (e.type === 'fallback_active') metrics.storeFallbackActive.set(e.active ? 1 : 0);
    },
  });
  // A Redis that is down at start-up must not keep the gateway from serving under its fault policy.
  await redis.ready(opts.connectWaitMs ?? 3_000).catch(() => undefined);
  const kind = storeConfig.url.startsWith('redis-cluster') || storeConfig.url.startsWith('rediss-cluster') ? 'redis-cluster' : 'redis';
  return {
    store: createBlockedCacheStore(resilient),
    kind,
    reachable: () => redis.ping().then(
      () => true,
      () => false,
    ),
    fallbackActive: () => resilient.fallbackActive,
  };
}

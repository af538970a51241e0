/**
 * @module Builds the Store that `store.url` names: memory; or Redis / Redis Cluster behind the fault
 * policy (timeouts, circuit breaker, onError) and the local cache of blocked buckets. It reports to an
 * observer (metrics) and logs the store's state changes, once each: unreachable at start, falling back,
 * recovered; and failed refunds.
 */
import type { Config } from '../config/types.js';
import { createBlockedCacheStore } from './blocked.js';
import { systemClock, type Clock } from './clock.js';
import type { StoreError } from './errors.js';
import { createLeaseStore, type LeaseStore } from './lease.js';
import { MemoryStore } from './memory.js';
import { createRedisStore } from './redis.js';
import { createResilientStore, type BreakerOptions, type StoreEvent } from './resilient.js';
import { parseStoreUrl, redactStoreUrl } from '../config/store-url.js';
import { StoreStateLog } from './state-log.js';
import type { Store, StoreLog, StoreObserver } from './types.js';

export interface StoreHandle {
  readonly store: Store;
  /** `memory`, `redis` or `redis-cluster`, for the startup line and /readyz. */
  readonly kind: 'memory' | 'redis' | 'redis-cluster';
  /** Does the store answer now? (A bounded ping; always true for memory.) /readyz and rategate_store_up. */
  reachable(): Promise<boolean>;
  /** True while decisions are made by the fault policy (onError) instead of the store. */
  fallbackActive(): boolean;
  /** The lease layer (docs/leases.md), when `store.lease` is on for a Redis store. */
  readonly leases?: LeaseStore;
}

export interface StoreFactoryOptions {
  /** Metrics; default: nothing is reported. */
  observer?: Partial<StoreObserver>;
  /** Where state changes are logged; default: nowhere. */
  log?: StoreLog;
  /** Tests only: the memory store's clock, or the Redis scripts' (and the blocked cache's) clock. */
  now?: () => number;
  /** How long start-up waits for a first Redis connection before going on under the fault policy. */
  connectWaitMs?: number;
  /** Tests only: the breaker's settings and clock. */
  breaker?: Partial<BreakerOptions>;
  clock?: Clock;
}

/** A failed refund is logged at most this often (with the count since), so a dead slot cannot flood the log. */
const REFUND_LOG_INTERVAL_MS = 10_000;

/** `lease` defaults to on; `gateways` (the replicas sharing the store) sizes leases, default 2. */
export type StoreSettings = Pick<Config['store'], 'url' | 'prefix' | 'timeout' | 'onError'> & { readonly lease?: boolean; readonly gateways?: number };

export async function createStoreFor(storeConfig: StoreSettings, opts: StoreFactoryOptions = {}): Promise<StoreHandle> {
  const url = parseStoreUrl(storeConfig.url);
  const observer = opts.observer ?? {};
  const log = opts.log;
  if (url.kind === 'memory') {
    const store = new MemoryStore(opts.now ? { now: opts.now } : {});
    return { store, kind: 'memory', reachable: async () => true, fallbackActive: () => false };
  }
  const where = { store: url.kind, url: redactStoreUrl(storeConfig.url) };
  const redis = createRedisStore({
    url: storeConfig.url,
    prefix: storeConfig.prefix,
    timeoutMs: storeConfig.timeout,
    ...(opts.now ? { now: opts.now } : {}),
    onRefundError: refundReporter(observer, log, where),
    ...(observer.batchSent ? { onBatch: observer.batchSent.bind(observer) } : {}),
  });
  const policy = `onError: ${storeConfig.onError} (per-rule onStoreError aside)`;
  const states = log ? new StoreStateLog({ log, where, policy, ...(opts.clock ? { clock: opts.clock } : {}) }) : undefined;
  const resilient = createResilientStore(redis, {
    fallback: new MemoryStore(opts.now ? { now: opts.now } : {}),
    ...(opts.breaker ? { breaker: opts.breaker } : {}),
    ...(opts.clock ? { clock: opts.clock } : {}),
    onEvent: (e: StoreEvent) => {
      if (e.type === 'error') observer.storeError?.(e.reason);
      else if (e.type === 'local_rejection') observer.localRejection?.('fallback');
      else if (e.type === 'fallback_active') {
        observer.fallbackActive?.(e.active);
        if (e.active) states?.failed(message(e.cause));
        else states?.recovered();
      }
    },
  });
  // A Redis that is down at start-up must not keep the gateway from serving under its fault policy.
  try {
    await redis.ready(opts.connectWaitMs ?? 3_000);
  } catch (err) {
    states?.unreachableAtStart(message(err));
    // Said once when it does connect, unless the fault policy's own recovery line will say it.
    redis.onReady(() => {
      if (!resilient.fallbackActive) states?.recovered('store connected');
    });
  }
  // Leases sit inside the blocked-bucket cache (a flood of rejections never reaches them) and outside
  // the fault policy: a fallback answer grants none, and tokens already counted by the store stay
  // spendable while it fails. Give-backs go straight to Redis (best effort).
  const leases =
    storeConfig.lease === false
      ? undefined
      : createLeaseStore(resilient, {
          giveBack: (spec, tokens, chargedAt) => redis.giveBack(spec, tokens, chargedAt),
          ...(storeConfig.gateways !== undefined ? { gateways: storeConfig.gateways } : {}),
          // Tests that script the store's time script the leases' too (a lease must not outlive its window).
          ...(opts.clock ? { clock: opts.clock } : opts.now ? { clock: { now: opts.now, after: systemClock.after } } : {}),
        });
  return {
    store: createBlockedCacheStore(leases ?? resilient, {
      ...(opts.now ? { now: opts.now } : {}),
      ...(observer.localRejection ? { onLocalRejection: () => observer.localRejection!('blocked_cache') } : {}),
    }),
    ...(leases ? { leases } : {}),
    kind: url.kind,
    reachable: () => redis.ping().then(
      () => true,
      () => false,
    ),
    fallbackActive: () => resilient.fallbackActive,
  };
}

/** Counts every failed refund; logs the first, then at most one line per interval with the count since. */
export function refundReporter(
  observer: Partial<StoreObserver>,
  log: StoreLog | undefined,
  where: object,
  now: () => number = Date.now,
): (err: StoreError) => void {
  let lastLogged = -Infinity;
  let unlogged = 0;
  return (err) => {
    observer.refundFailed?.();
    unlogged++;
    const t = now();
    if (t - lastLogged < REFUND_LOG_INTERVAL_MS) return;
    log?.warn(
      { ...where, err: err.message, failures: unlogged },
      'store refund failed: a cross-slot request was rejected but a slot keeps its charge until the bucket window or refill passes it (fewer admissions, never more)',
    );
    lastLogged = t;
    unlogged = 0;
  };
}

function message(err: unknown): string | undefined {
  return err === undefined ? undefined : err instanceof Error ? err.message : String(err);
}

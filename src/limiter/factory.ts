/**
 * @module Builds the Store that `store.url` names: memory; or Redis / Redis Cluster / Sentinel-managed
 * Redis behind the fault policy (timeouts, a breaker per master, onError) and the local cache of blocked
 * buckets. It reports to an observer (metrics, per node too) and logs the store's state changes per
 * master, once each (state-log.ts): unreachable at start, failing, failover, recovered; and failed refunds.
 */
import type { Config } from '../config/types.js';
import { createBlockedCacheStore } from './blocked.js';
import { systemClock, type Clock } from './clock.js';
import type { StoreError } from './errors.js';
import { createLeaseStore, type LeaseStore } from './redis/lease.js';
import { DEFAULT_MAX_KEYS, MemoryStore } from './memory/store.js';
import { fullReporter } from './memory/full-report.js';
import { createRedisStore } from './redis/store.js';
import { createResilientStore, type BreakerOptions, type StoreEvent } from './resilient.js';
import { parseStoreUrl, redactStoreUrl } from '../config/store-url.js';
import { StoreStateLog } from './state-log.js';
import { StoreWarnings } from './store-warnings.js';
import type { Store, StoreLog, StoreObserver } from './types.js';
import { formatPrefix } from './store-format.js';

export interface StoreHandle {
  readonly store: Store;
  /** `memory`, `redis`, `redis-cluster` or `redis-sentinel`, for the startup line and /readyz. */
  readonly kind: 'memory' | 'redis' | 'redis-cluster' | 'redis-sentinel';
  /**
   * Do decisions come from the store now? Every key has a master (cluster: all slots covered), no
   * master's calls are failing, and every master answers as a master (a bounded ping; ROLE on a single
   * Redis). Always true for memory. /readyz and rategate_store_up.
   */
  reachable(): Promise<boolean>;
  /** True while decisions are made by the fault policy (onError) instead of the store. */
  fallbackActive(): boolean;
  /** The lease layer (docs/leases.md), when `store.lease` is on for a Redis store. */
  readonly leases?: LeaseStore;
  /** Buckets held in this process: the memory store's, or the Redis store's local fallback's (rategate_store_keys). */
  localKeys(): number;
  /** Redis stores: the gateways sharing the store now (fleet/fleet.ts), for the fallback's share and the leases'. */
  setGateways?(n: number): void;
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

/** `lease` defaults to on; `gateways` (the replicas sharing the store) sizes leases and the fallback's share, default 2. */
export type StoreSettings = Pick<Config['store'], 'url' | 'prefix' | 'timeout' | 'onError'> & {
  /** Buckets the memory store (or the Redis store's local fallback) may hold (store.maxKeys). */
  readonly maxKeys?: number;
  readonly lease?: boolean;
  readonly gateways?: number;
  readonly sentinelPassword?: string | null;
};

export async function createStoreFor(storeConfig: StoreSettings, opts: StoreFactoryOptions = {}): Promise<StoreHandle> {
  const url = parseStoreUrl(storeConfig.url);
  const observer = opts.observer ?? {};
  const log = opts.log;
  const memory = (role: string): MemoryStore => boundedMemoryStore(storeConfig, opts, role);
  if (url.kind === 'memory') {
    const store = memory('memory store');
    return { store, kind: 'memory', reachable: async () => true, fallbackActive: () => false, localKeys: () => store.size };
  }
  const where = { store: url.kind, url: redactStoreUrl(storeConfig.url) };
  const redis = createRedisStore({
    url: storeConfig.url,
    // The format version joins the prefix from format 2 on: two releases share buckets only when they read them alike.
    prefix: formatPrefix(storeConfig.prefix),
    timeoutMs: storeConfig.timeout,
    ...(storeConfig.sentinelPassword != null ? { sentinelPassword: storeConfig.sentinelPassword } : {}),
    ...(opts.now ? { now: opts.now } : {}),
    onRefundError: refundReporter(observer, log, where),
    ...(observer.batchSent ? { onBatch: observer.batchSent.bind(observer) } : {}),
  });
  const policy = `onError: ${storeConfig.onError} (per-rule onStoreError aside)`;
  const states = log ? new StoreStateLog({ log, where, policy, ...(opts.clock ? { clock: opts.clock } : {}) }) : undefined;
  const warnings = log ? new StoreWarnings({ log, where, ...(opts.clock ? { clock: opts.clock } : {}) }) : undefined;
  const fallback = memory('local fallback');
  const resilient = createResilientStore(redis, {
    fallback,
    ...(storeConfig.gateways !== undefined ? { gateways: storeConfig.gateways } : {}),
    ...(opts.breaker ? { breaker: opts.breaker } : {}),
    ...(opts.clock ? { clock: opts.clock } : {}),
    onEvent: storeEventReporter(observer, states, warnings),
  });
  // A Redis that is down at start-up must not keep the gateway from serving under its fault policy.
  try {
    await redis.ready(opts.connectWaitMs ?? 3_000);
  } catch (err) {
    states?.unreachableAtStart(message(err));
    redis.onReady(() => states?.connected());
  }
  const leases = leaseLayer(storeConfig, opts, resilient, redis);
  return {
    store: createBlockedCacheStore(leases ?? resilient, {
      ...(opts.now ? { now: opts.now } : {}),
      ...(observer.localRejection ? { onLocalRejection: () => observer.localRejection!('blocked_cache') } : {}),
      // Another gateway's unspent lease comes back to the store: a block is re-checked as often.
      ...(leases ? { recheckMs: leases.returnedWithinMs, storeDecides: () => !resilient.fallbackActive } : {}),
    }),
    ...(leases ? { leases } : {}),
    kind: url.kind,
    reachable: () => redisReachable(redis, resilient),
    fallbackActive: () => resilient.fallbackActive,
    localKeys: () => fallback.size,
    setGateways: (n) => {
      resilient.setGateways(n);
      leases?.setGateways(n);
    },
  };
}

/** Readiness: every key has a master, the fallback is not answering, and Redis answers a ping. */
async function redisReachable(redis: ReturnType<typeof createRedisStore>, resilient: ReturnType<typeof createResilientStore>): Promise<boolean> {
  if (!redis.covered() || resilient.fallbackActive) return false;
  return redis.ping().then(
    () => true,
    () => false,
  );
}

/** The resilient store's events as metrics and state-change log lines. */
function storeEventReporter(observer: Partial<StoreObserver>, states: StoreStateLog | undefined, warnings: StoreWarnings | undefined): (e: StoreEvent) => void {
  return (e) => {
    switch (e.type) {
      case 'error':
        observer.storeError?.(e.reason);
        if (e.reason !== 'circuit_open') warnings?.error(e.node, e.reason);
        break;
      case 'fallback_decision':
        warnings?.decided(e.node, e.result);
        break;
      case 'local_rejection':
        observer.localRejection?.('fallback');
        break;
      case 'fallback_active':
        observer.fallbackActive?.(e.active);
        break;
      case 'node':
        observer.nodeUp?.(e.node, !e.failing);
        if (e.failing) states?.failed(e.node, message(e.cause));
        else states?.succeeded(e.node);
        break;
      case 'circuit':
        if (e.state === 'open') states?.opened(e.node, undefined);
        break;
      case 'promotion':
        observer.nodeGone?.(e.node);
        states?.promoted(e.from, e.to, e.node);
        break;
      case 'shared':
        states?.shared(e.from, e.to);
        break;
    }
  };
}

/** A memory store (the store, or the Redis store's local fallback) bounded by store.maxKeys, saying when full. */
function boundedMemoryStore(storeConfig: StoreSettings, opts: StoreFactoryOptions, role: string): MemoryStore {
  return new MemoryStore({
    ...(opts.now ? { now: opts.now } : {}),
    ...(storeConfig.maxKeys !== undefined ? { maxKeys: storeConfig.maxKeys } : {}),
    onFull: fullReporter(opts.observer ?? {}, opts.log, storeConfig.maxKeys ?? DEFAULT_MAX_KEYS, role),
  });
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

/**
 * Leases sit inside the blocked-bucket cache (a flood of rejections never reaches them) and outside
 * the fault policy: a fallback answer grants none, and tokens already counted by the store stay
 * spendable while it fails. Give-backs go straight to Redis (best effort).
 */
function leaseLayer(
  storeConfig: StoreSettings,
  opts: StoreFactoryOptions,
  resilient: ReturnType<typeof createResilientStore>,
  redis: ReturnType<typeof createRedisStore>,
): LeaseStore | undefined {
  if (storeConfig.lease === false) return undefined;
  return createLeaseStore(resilient, {
    giveBack: (spec, tokens, chargedAt) => redis.giveBack(spec, tokens, chargedAt),
    ...(storeConfig.gateways !== undefined ? { gateways: storeConfig.gateways } : {}),
    // Tests that script the store's time script the leases' too (a lease must not outlive its window).
    ...(opts.clock ? { clock: opts.clock } : opts.now ? { clock: { now: opts.now, after: systemClock.after } } : {}),
  });
}

/**
 * @module The Redis-protocol backends: a single Redis (TCP, TLS or a Unix socket), Redis Cluster and
 * Sentinel-managed Redis, under `redis…://` and their `valkey…://` aliases (Valkey, KeyDB and Dragonfly
 * speak the same protocol and scripts). Each sits behind the fault policy (timeouts, a breaker per
 * master, onError), the leases and the local cache of blocked buckets; it reports to an observer
 * (metrics, per node too) and logs its state changes per master, once each (state-log.ts).
 */
import { parseStoreUrl, redactStoreUrl, type StoreUrl } from '../../config/store-url.js';
import { createBlockedCacheStore } from '../blocked.js';
import { systemClock } from '../clock.js';
import type { StoreError } from '../errors.js';
import { createLeaseStore, type LeaseStore } from '../redis/lease.js';
import { createRedisStore } from '../redis/store.js';
import { createResilientStore, type StoreEvent } from '../resilient.js';
import { StoreStateLog } from '../state-log.js';
import { StoreWarnings } from '../store-warnings.js';
import { formatPrefix } from '../store-format.js';
import type { StoreLog, StoreObserver } from '../types.js';
import { boundedMemoryStore } from './memory.js';
import type { StoreBackend, StoreFactoryOptions, StoreHandle, StoreSettings } from './types.js';

/** A failed refund is logged at most this often (with the count since), so a dead slot cannot flood the log. */
const REFUND_LOG_INTERVAL_MS = 10_000;

const can = { shared: true, redisProtocol: true } as const;

/** The backend of one Redis topology; its schemes with and without TLS, and their Valkey aliases. */
function redisFamily(kind: Exclude<StoreUrl['kind'], 'memory'>, schemes: readonly string[]): StoreBackend {
  return { schemes, can, open: (settings, opts) => openRedis(kind, settings, opts) };
}

export const redisBackends: readonly StoreBackend[] = [
  redisFamily('redis', ['redis', 'rediss', 'redis+unix', 'valkey', 'valkeys', 'valkey+unix']),
  redisFamily('redis-cluster', ['redis-cluster', 'rediss-cluster', 'valkey-cluster', 'valkeys-cluster']),
  redisFamily('redis-sentinel', ['redis-sentinel', 'rediss-sentinel', 'valkey-sentinel', 'valkeys-sentinel']),
];

async function openRedis(kind: string, storeConfig: StoreSettings, opts: StoreFactoryOptions): Promise<StoreHandle> {
  const observer = opts.observer ?? {};
  const log = opts.log;
  const where = { store: parseStoreUrl(storeConfig.url).kind, url: redactStoreUrl(storeConfig.url) };
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
  const states = log
    ? new StoreStateLog({ log, where, policy, ...(opts.clock ? { clock: opts.clock } : {}) })
    : undefined;
  const warnings = log ? new StoreWarnings({ log, where, ...(opts.clock ? { clock: opts.clock } : {}) }) : undefined;
  const fallback = boundedMemoryStore(storeConfig, opts, 'local fallback');
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
  const leases = storeConfig.lease === false ? undefined : leasesOver(resilient, redis, storeConfig, opts);
  let gateways = storeConfig.gateways ?? 2;
  return {
    store: createBlockedCacheStore(leases ?? resilient, {
      ...(opts.now ? { now: opts.now } : {}),
      ...(observer.localRejection ? { onLocalRejection: () => observer.localRejection!('blocked_cache') } : {}),
      // Another gateway's unspent lease comes back to the store: a block is re-checked as often, while
      // the fleet counts another gateway (the configured store.gateways until it has counted).
      ...(leases
        ? {
            recheckMs: leases.returnedWithinMs,
            storeDecides: () => !resilient.fallbackActive,
            othersMayLease: () => gateways > 1,
          }
        : {}),
    }),
    ...(leases ? { leases } : {}),
    kind,
    can,
    reachable: () => redisReachable(redis, resilient),
    fallbackActive: () => resilient.fallbackActive,
    localKeys: () => fallback.size,
    setGateways: (n) => {
      gateways = n;
      resilient.setGateways(n);
      leases?.setGateways(n);
    },
  };
}

/**
 * Leases sit inside the blocked-bucket cache (a flood of rejections never reaches them) and outside
 * the fault policy: a fallback answer grants none, and tokens already counted by the store stay
 * spendable while it fails. Give-backs go straight to Redis (best effort).
 */
function leasesOver(
  resilient: ReturnType<typeof createResilientStore>,
  redis: ReturnType<typeof createRedisStore>,
  storeConfig: StoreSettings,
  opts: StoreFactoryOptions,
): LeaseStore {
  return createLeaseStore(resilient, {
    giveBack: (spec, tokens, chargedAt) => redis.giveBack(spec, tokens, chargedAt),
    ...(storeConfig.gateways !== undefined ? { gateways: storeConfig.gateways } : {}),
    // Tests that script the store's time script the leases' too (a lease must not outlive its window).
    ...(opts.clock ? { clock: opts.clock } : opts.now ? { clock: { now: opts.now, after: systemClock.after } } : {}),
  });
}

/** Readiness: every key has a master, the fallback is not answering, and Redis answers a ping. */
async function redisReachable(
  redis: ReturnType<typeof createRedisStore>,
  resilient: ReturnType<typeof createResilientStore>,
): Promise<boolean> {
  if (!redis.covered() || resilient.fallbackActive) return false;
  return redis.ping().then(
    () => true,
    () => false,
  );
}

/** The resilient store's events as metrics and state-change log lines. */
function storeEventReporter(
  observer: Partial<StoreObserver>,
  states: StoreStateLog | undefined,
  warnings: StoreWarnings | undefined,
): (e: StoreEvent) => void {
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

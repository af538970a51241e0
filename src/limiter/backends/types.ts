/**
 * @module What every store backend gives the gateway (a StoreHandle), what it is opened with, and what
 * it says it can do. The backends themselves (memory.ts, redis.ts) and their registry (index.ts) sit
 * beside this; limiter/factory.ts is the one public entry.
 */
import type { Config } from '../../config/types.js';
import type { Clock } from '../clock.js';
import type { LeaseStore } from '../redis/lease.js';
import type { BreakerOptions } from '../resilient.js';
import type { Store, StoreLog, StoreObserver } from '../types.js';

export interface StoreHandle {
  readonly store: Store;
  /** The backend's name (`memory`, `redis`, `redis-cluster`, `redis-sentinel`), for the startup line and /readyz. */
  readonly kind: string;
  /** What the backend can do (the guard's state, `--workers` and the status page choose by it). */
  readonly can: BackendCapabilities;
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

export interface BackendCapabilities {
  /** Every process and replica opening the same URL shares one count (else each process counts alone). */
  readonly shared: boolean;
  /** Speaks the Redis protocol with Lua and streams: the guard state (blocks, exemptions, bans) and in-flight slots are shared through it. */
  readonly redisProtocol: boolean;
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

/** `lease` defaults to on; `gateways` (the replicas sharing the store) sizes leases and the fallback's share, default 2. */
export type StoreSettings = Pick<Config['store'], 'url' | 'prefix' | 'timeout' | 'onError'> & {
  /** Buckets the memory store (or the Redis store's local fallback) may hold (store.maxKeys). */
  readonly maxKeys?: number;
  readonly lease?: boolean;
  readonly gateways?: number;
  readonly sentinelPassword?: string | null;
};

/** One backend: the URL schemes it opens, what it can do, and its opener (its lifecycle is the handle's store: close()). */
export interface StoreBackend {
  /** The schemes of `store.url` it opens (`memory` for the bare word). */
  readonly schemes: readonly string[];
  readonly can: BackendCapabilities;
  open(settings: StoreSettings, opts: StoreFactoryOptions): Promise<StoreHandle>;
}

/**
 * @module The Redis store's options (store.ts).
 */
import type { StoreError } from '../errors.js';

export interface RedisStoreOptions {
  /** `redis://`, `rediss://` (TLS), `redis-cluster://h:p,h:p` or `redis-sentinel://h:p,h:p/NAME` (and TLS forms): see config/store-url.ts. */
  readonly url: string;
  /** The sentinels' own password (`store.sentinelPassword`). */
  readonly sentinelPassword?: string;
  /** Prepended to every bucket key as `${prefix}:${spec.key}`. */
  readonly prefix: string;
  /** Upper bound of every store call, in ms. */
  readonly timeoutMs: number;
  /** Tests only: overrides Redis TIME so that scripted times apply. Production reads the server clock. */
  readonly now?: () => number;
  /**
   * Batch the consume calls of one event-loop turn into one script call (batcher.ts). Default: on for a
   * single Redis, off for a cluster, where the requests of different clients fall in different slots and
   * so rarely share a batch, and the wait for the end of the turn only costs throughput and p99 (both
   * measured with bench/redis-store.ts, which compares the two).
   */
  readonly batching?: boolean;
  /** TCP connect timeout for (re)connection attempts; requests never wait for it (no offline queue). */
  readonly connectTimeoutMs?: number;
  /** Called when a cross-slot refund fails (the charge then stands: under-admission until it expires). */
  readonly onRefundError?: (err: StoreError) => void;
  /** Told the number of requests of each script call the batcher sends. */
  readonly onBatch?: (requests: number) => void;
}

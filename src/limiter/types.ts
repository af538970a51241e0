/**
 * @module The Store contract: every counter backend (memory, Redis, Redis Cluster) implements it; and
 * what the limiter reports through (an observer for metrics, a logger), so it knows neither Prometheus nor pino.
 */
import type { Algorithm, OnError } from '../config/types.js';
import type { CircuitState, StoreOp } from './breaker.js';
import type { StoreErrorReason } from './errors.js';
import { RategateError } from '../errors.js';

/** One bucket a request must be charged in. */
export interface BucketSpec {
  /** Identity-scoped key without the store prefix, e.g. `sign-up:{ip:203.0.113.7}`. */
  readonly key: string;
  readonly limit: number;
  readonly periodMs: number;
  readonly algorithm: Algorithm;
  readonly cost: number;
  /** A shadow bucket is counted and reported but never vetoes the request. */
  readonly shadow: boolean;
  /** What to do with this bucket when the store fails: the rule's onStoreError, else store.onError. */
  readonly onError: OnError;
  /**
   * Leases (lease.ts) only: extra tokens wanted beyond `cost`, granted as far as they fit in what
   * remains ÷ `leaseShare`. Stores without leases ignore both (the Redis store honours them).
   */
  readonly lease?: number;
  readonly leaseShare?: number;
}

/** The state of one bucket after a consume (or a peek). Times are Unix epoch milliseconds. */
export interface BucketState {
  /** Requests (of cost 1) left after this one; 0 when limited. */
  readonly remaining: number;
  /** When the bucket is fully replenished if nothing more comes (end of window for fixed-window). */
  readonly resetAt: number;
  /** True when this bucket had no room for the request (for a shadow bucket: would have rejected). */
  readonly limited: boolean;
  /** When a request of this cost would next be admitted; equals `now` when it was admitted. */
  readonly retryAt: number;
  /** Leases only: extra tokens the store charged for this gateway's lease (then `remaining` is after them). */
  readonly leased?: number;
}

/**
 * Who made a decision, as the access line names it: the shared store; a lease this gateway held; the
 * blocked-bucket cache (a refusal the store gave before); the fault policy (`fallback`: the store could
 * not answer); the memory store (`store.url: memory`). Set where the decision is made, so it costs a constant.
 */
export type Decider = 'store' | 'lease' | 'cache' | 'fallback' | 'memory';

export interface ConsumeOutcome {
  /** True when every non-shadow bucket had room: all buckets were then charged. False: none was. */
  readonly allowed: boolean;
  /** Who decided (unset only by stores outside this package: read as `store`). */
  readonly decider?: Decider;
  /** The store's clock at decision time (Redis TIME for Redis stores), epoch ms. */
  readonly now: number;
  /** One state per spec, in the order given. */
  readonly buckets: readonly BucketState[];
}

/** Thrown by a store (or its fault policy) when a decision cannot be made: the gateway answers 503. */
export class StoreUnavailableError extends RategateError {
  readonly code = 'STORE_UNAVAILABLE';
}

export interface Store {
  /** Checks every bucket and charges all of them or none, atomically. */
  consume(specs: readonly BucketSpec[]): Promise<ConsumeOutcome>;
  /**
   * The same decision, synchronously, when this store can make it without I/O (the memory store always;
   * a held lease; a blocked bucket), charged exactly as `consume` would; else undefined, having charged
   * and changed nothing, and the caller calls `consume`. Saves the request its promise hops.
   */
  consumeLocal?(specs: readonly BucketSpec[]): ConsumeOutcome | undefined;
  /**
   * Gives back what `outcome`, an allowed consume of `specs`, charged: the request was refused after its
   * decision (the upstream pool's cap or wait) and must cost nothing (SPEC §3.4). Each charged bucket
   * gets its cost back where it was taken (a lease, the store), never more than the charge still
   * weighs. Best effort and bounded by the store's timeout: it never rejects, and a refund that fails
   * leaves the charge standing (fewer admissions, never more). The caller refunds an outcome once.
   */
  refund?(specs: readonly BucketSpec[], outcome: ConsumeOutcome): Promise<void>;
  /** Reads a bucket without charging it. */
  peek(spec: BucketSpec): Promise<BucketState>;
  /**
   * Reads every bucket of `specs` without charging any, as one outcome: `allowed` false when a
   * non-shadow bucket has no room for its cost (each state as `peek` gives it). Optional: without it the
   * caller peeks each bucket. A store with a cache of blocked buckets learns from it as from a consume.
   */
  read?(specs: readonly BucketSpec[]): Promise<ConsumeOutcome>;
  /**
   * The same read, synchronously, when this store knows the answer without I/O (the memory store
   * always; a bucket the blocked cache holds as blocked: a refusal); else undefined. Never charges.
   */
  readLocal?(specs: readonly BucketSpec[]): ConsumeOutcome | undefined;
  /** Forgets a bucket: it starts full again. */
  reset(spec: BucketSpec): Promise<void>;
  close(): Promise<void>;
}

/** Where a request was rejected without the shared store deciding it. */
export type LocalRejectionSource = 'blocked_cache' | 'fallback';

/**
 * What the limiter reports for metrics, without knowing Prometheus (app/start.ts wires it to observability/metrics.ts).
 * Store latency is not here: the request path measures it once, around the whole decision.
 */
export interface StoreObserver {
  /** A call the shared store could not answer (`circuit_open`: the breaker kept it from the store). */
  storeError(reason: StoreErrorReason | 'circuit_open'): void;
  /** Decisions are (true) or are no longer (false) made by the fault policy. */
  fallbackActive(active: boolean): void;
  /** A cross-slot refund failed: its charge stands until the bucket's window or refill passes it. */
  refundFailed(): void;
  /** A request rejected by the blocked-bucket cache, or by the local count of the fallback. */
  localRejection(source: LocalRejectionSource): void;
  /** The batcher sent one script call carrying this many requests. */
  batchSent(requests: number): void;
  /** One Redis master's calls succeed (true) or fail, its keys then following the fault policy (false). */
  nodeUp(node: string, up: boolean): void;
  /** A master was replaced by its promoted replica: its series goes. */
  nodeGone(node: string): void;
  /** A request refused because the memory store (or the local fallback) holds store.maxKeys buckets. */
  keysRefused(): void;
}

/** The logger calls the limiter makes: a pino Logger fits. */
export interface StoreLog {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

/** How a decision of the fault policy went: admitted, refused (a local count), or a 503 (`onError: deny`). */
export type FallbackResult = 'admitted' | 'refused' | 'unavailable';

/** What the fault policy (resilient.ts) reports for metrics and the state log, without knowing about Prometheus. */
export type StoreEvent =
  /** A request that could not use its master: why (`circuit_open`: the breaker skipped it). */
  | {
      readonly type: 'error';
      readonly op: StoreOp | 'ping';
      readonly reason: StoreErrorReason | 'circuit_open';
      readonly node: string;
    }
  /**
   * Some decisions are (true) or no decision is any longer (false) made by the fault policy: the
   * fallback gauge. `cause`: the failure that turned it on (none when a breaker did).
   */
  | { readonly type: 'fallback_active'; readonly active: boolean; readonly cause?: unknown }
  /** One master's calls fail (its keys follow the fault policy) or succeed again. */
  | {
      readonly type: 'node';
      readonly node: string;
      readonly failing: boolean;
      readonly circuit: CircuitState;
      readonly cause?: unknown;
    }
  /** A replica took over from a master: `from`'s breaker is gone; `wasFailing`: its keys were on the fault policy. */
  | {
      readonly type: 'promotion';
      readonly from: string;
      readonly to: string;
      readonly node: string;
      readonly wasFailing: boolean;
    }
  /** The first decision the store made for a failing master's keys after its replica took over: they are shared again. */
  | { readonly type: 'shared'; readonly from: string; readonly to: string; readonly node: string }
  /** A request the fallback store rejected (onError: local) while its master failed. */
  | { readonly type: 'local_rejection' }
  /** A request decided by the fault policy because `node` failed or its breaker was open. */
  | { readonly type: 'fallback_decision'; readonly node: string; readonly result: FallbackResult }
  | { readonly type: 'circuit'; readonly state: CircuitState; readonly node: string };

/** What a primary may offer beyond the Store contract: per-node routing, probes and promotions. */
export type PrimaryStore = Store & {
  /** A cheap health check of one master (all of them when no node is named): the half-open probe. */
  ping?(node?: string): Promise<unknown>;
  /** The masters that decide these buckets (each slot's owner, once; usually one). */
  nodesOf?(specs: readonly BucketSpec[]): readonly string[];
  /**
   * Registers the listener told when a replica takes over a master (`from`, `to`: for the log; `node`:
   * the name whose breaker goes, as `nodesOf` gave it).
   */
  onPromotion?(fn: (from: string, to: string, node: string) => void): void;
};

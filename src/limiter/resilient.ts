/**
 * @module The fault policy around a remote store: a circuit breaker, and each bucket's `onError`.
 *
 * While the primary (Redis) fails, every bucket follows its spec's `onError`:
 *   - `deny`:  the whole request fails with StoreUnavailableError (the gateway answers 503);
 *   - `local`: the bucket is counted in the in-process fallback store (per replica, so a fleet of N
 *              replicas admits up to N× the limit while Redis is down: the rate-limiter-flexible
 *              "insurance limiter" trade-off);
 *   - `allow`: fail open: the bucket is reported allowed and full (remaining = limit), not counted.
 * In one request, deny wins over everything; otherwise local buckets are counted locally (and may
 * reject) and allow buckets are skipped.
 *
 * The breaker makes a dead Redis cost nothing: after `failureThreshold` consecutive failures it opens,
 * and for `openMs` no call reaches the primary. Then it is half-open: exactly one call (a background
 * ping when the primary has one, else the next request) probes it; success closes the breaker, failure
 * opens it again. So recovery happens by itself, with or without traffic.
 *
 * Waiting: this layer adds none. The primary must bound its own calls (RedisStore does, by
 * `store.timeout`); while open, decisions are local and immediate.
 *
 * Time (the open period, the background probe's timer) comes from an injected Clock, so the breaker's
 * tests move time by hand instead of sleeping.
 */
import { systemClock, type Clock } from './clock.js';
import type { StoreErrorReason } from './errors.js';
import { StoreError } from './errors.js';
import { StoreUnavailableError, type BucketSpec, type BucketState, type ConsumeOutcome, type Store } from './types.js';

export type CircuitState = 'closed' | 'open' | 'half-open';
export type StoreOp = 'consume' | 'peek' | 'reset';

/** What the metrics layer needs, without this module knowing about Prometheus. */
export type StoreEvent =
  /** A request that could not use the primary: why (`circuit_open`: the breaker skipped it). */
  | { readonly type: 'error'; readonly op: StoreOp | 'ping'; readonly reason: StoreErrorReason | 'circuit_open' }
  /**
   * Decisions are (true) or are no longer (false) made by the fault policy: the fallback gauge, and a
   * log line each way. `cause`: the failure that turned it on (none when the breaker did).
   */
  | { readonly type: 'fallback_active'; readonly active: boolean; readonly cause?: unknown }
  /** A request the fallback store rejected (onError: local) while the primary failed. */
  | { readonly type: 'local_rejection' }
  | { readonly type: 'circuit'; readonly state: CircuitState };

export interface BreakerOptions {
  /** Consecutive failures that open the breaker. */
  readonly failureThreshold: number;
  /** How long it stays open before one probe is let through. */
  readonly openMs: number;
}

export interface ResilientStoreOptions {
  /** Where `onError: local` buckets are counted while the primary fails: a MemoryStore. */
  readonly fallback: Store;
  readonly breaker?: Partial<BreakerOptions>;
  readonly onEvent?: (e: StoreEvent) => void;
  /** The breaker's time and timers (tests: a fake clock). */
  readonly clock?: Clock;
}

/** A primary may offer a cheap health check, used as the half-open probe so recovery needs no traffic. */
export type PrimaryStore = Store & { ping?(): Promise<unknown> };

export interface ResilientStore extends Store {
  /** True while decisions are made by the fault policy (the primary is failing or the breaker is open). */
  readonly fallbackActive: boolean;
  readonly circuit: CircuitState;
}

const DEFAULT_BREAKER: BreakerOptions = { failureThreshold: 5, openMs: 1_000 };

class Resilient implements ResilientStore {
  private state: CircuitState = 'closed';
  private failures = 0;
  private openUntil = 0;
  /** A probe is in flight: other calls keep to the fault policy until it answers. */
  private probing = false;
  /** Cancels the background probe, when one is scheduled. */
  private cancelProbe: (() => void) | undefined;
  private fallbackOn = false;
  private closed = false;
  private readonly threshold: number;
  private readonly openMs: number;
  private readonly fallback: Store;
  private readonly emit: (e: StoreEvent) => void;
  private readonly clock: Clock;

  constructor(
    private readonly primary: PrimaryStore,
    opts: ResilientStoreOptions,
  ) {
    this.fallback = opts.fallback;
    this.threshold = Math.max(1, opts.breaker?.failureThreshold ?? DEFAULT_BREAKER.failureThreshold);
    this.openMs = Math.max(1, opts.breaker?.openMs ?? DEFAULT_BREAKER.openMs);
    this.emit = opts.onEvent ?? (() => {});
    this.clock = opts.clock ?? systemClock;
  }

  get fallbackActive(): boolean {
    return this.fallbackOn;
  }

  get circuit(): CircuitState {
    return this.state;
  }

  consume(specs: readonly BucketSpec[]): Promise<ConsumeOutcome> {
    return this.viaPrimary(
      'consume',
      () => this.primary.consume(specs),
      (err) => this.degradedConsume(specs, err),
    );
  }

  peek(spec: BucketSpec): Promise<BucketState> {
    return this.viaPrimary(
      'peek',
      () => this.primary.peek(spec),
      (err) => this.degradedPeek(spec, err),
    );
  }

  /**
   * Asks the primary when the breaker allows it, else (or when it fails) answers by the fault policy.
   * `err` is undefined when the breaker kept the call from the primary.
   */
  private async viaPrimary<T>(op: 'consume' | 'peek', call: () => Promise<T>, degraded: (err: unknown) => Promise<T>): Promise<T> {
    if (!this.admit()) {
      this.emit({ type: 'error', op, reason: 'circuit_open' });
      if (op === 'consume') this.setFallback(true, undefined);
      return degraded(undefined);
    }
    try {
      const out = await call();
      this.succeeded();
      return out;
    } catch (err) {
      this.failed(op, err);
      return degraded(err);
    }
  }

  /** Resets the local count too; fails (503 for the admin API) when the shared bucket could not be reset. */
  async reset(spec: BucketSpec): Promise<void> {
    await this.fallback.reset(spec);
    if (!this.admit()) {
      this.emit({ type: 'error', op: 'reset', reason: 'circuit_open' });
      throw new StoreUnavailableError('store unavailable (circuit open): bucket not reset');
    }
    try {
      await this.primary.reset(spec);
      this.succeeded();
    } catch (err) {
      this.failed('reset', err);
      throw new StoreUnavailableError('store unavailable: bucket not reset', { cause: err });
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.stopProbe();
    await Promise.all([this.primary.close(), this.fallback.close()]);
  }

  /** May this call go to the primary? Half-open lets exactly one through (the probe). */
  private admit(): boolean {
    if (this.state === 'closed') return true;
    if (this.state === 'open') {
      if (this.clock.now() < this.openUntil) return false;
      this.setState('half-open');
    }
    if (this.probing) return false;
    this.probing = true;
    return true;
  }

  private succeeded(): void {
    this.failures = 0;
    this.probing = false;
    if (this.state !== 'closed') {
      this.stopProbe();
      this.setState('closed');
    }
    this.setFallback(false, undefined);
  }

  private failed(op: StoreOp | 'ping', err: unknown): void {
    this.emit({ type: 'error', op, reason: err instanceof StoreError ? err.reason : 'connection' });
    this.setFallback(true, err);
    this.failures++;
    this.probing = false;
    if (this.state === 'half-open' || this.failures >= this.threshold) this.open();
    else this.scheduleProbe();
  }

  private open(): void {
    this.openUntil = this.clock.now() + this.openMs;
    this.setState('open');
    this.stopProbe();
    this.scheduleProbe();
  }

  /**
   * Probes in the background, one openMs from now, so that recovery neither waits for nor costs a
   * request: with the breaker open, and also while the fault policy answers below its threshold (the
   * requests that would notice may never come, e.g. clients the blocked cache answers locally).
   */
  private scheduleProbe(): void {
    if (typeof this.primary.ping !== 'function' || this.closed || this.cancelProbe !== undefined) return;
    this.cancelProbe = this.clock.after(this.openMs, () => {
      this.cancelProbe = undefined;
      if (this.closed) return;
      if (this.state === 'open' ? !this.admit() : this.state !== 'closed' || !this.fallbackOn) return;
      this.primary.ping!().then(
        () => this.succeeded(),
        (err: unknown) => this.failed('ping', err),
      );
    });
  }

  private stopProbe(): void {
    this.cancelProbe?.();
    this.cancelProbe = undefined;
  }

  private setState(s: CircuitState): void {
    if (this.state === s) return;
    this.state = s;
    this.emit({ type: 'circuit', state: s });
  }

  private setFallback(on: boolean, cause: unknown): void {
    if (this.fallbackOn === on) return;
    this.fallbackOn = on;
    this.emit(cause === undefined ? { type: 'fallback_active', active: on } : { type: 'fallback_active', active: on, cause });
  }

  /** Applies each bucket's onError to a request the primary could not decide. */
  private async degradedConsume(specs: readonly BucketSpec[], cause: unknown): Promise<ConsumeOutcome> {
    let local = 0;
    for (const spec of specs) {
      if (spec.onError === 'deny') throw unavailable(cause);
      if (spec.onError === 'local') local++;
    }
    if (local === specs.length) return this.fallback.consume(specs).then(this.counted);
    const now = this.clock.now();
    if (local === 0) return { allowed: true, now, buckets: specs.map((s) => openState(s, now)) };
    const localSpecs = specs.filter((s) => s.onError === 'local');
    const out = this.counted(await this.fallback.consume(localSpecs));
    let k = 0;
    const buckets = specs.map((s) => (s.onError === 'local' ? out.buckets[k++]! : openState(s, out.now)));
    return { allowed: out.allowed, now: out.now, buckets };
  }

  private degradedPeek(spec: BucketSpec, cause: unknown): Promise<BucketState> {
    if (spec.onError === 'deny') return Promise.reject(unavailable(cause));
    if (spec.onError === 'local') return this.fallback.peek(spec);
    return Promise.resolve(openState(spec, this.clock.now()));
  }

  /** Reports a local rejection of the fallback. */
  private readonly counted = (out: ConsumeOutcome): ConsumeOutcome => {
    if (!out.allowed) this.emit({ type: 'local_rejection' });
    return out;
  };
}

/** Fail open: the bucket is not counted and is reported full. */
function openState(spec: BucketSpec, now: number): BucketState {
  return { remaining: spec.limit, resetAt: now, limited: false, retryAt: now };
}

function unavailable(cause: unknown): StoreUnavailableError {
  return cause === undefined
    ? new StoreUnavailableError('store unavailable (circuit open) and a matched rule has onError: deny')
    : new StoreUnavailableError('store unavailable and a matched rule has onError: deny', { cause });
}

export function createResilientStore(primary: PrimaryStore, opts: ResilientStoreOptions): ResilientStore {
  return new Resilient(primary, opts);
}

/**
 * @module A local cache of blocked buckets in front of a store, so that a flood costs the store nothing.
 *
 * Once a consume shows a non-shadow bucket limited until `retryAt` T, no request of that cost can pass
 * it before T, for all three algorithms: counts only grow until the window ends or tokens
 * refill, and T is exactly that moment (other replicas' charges can only push it later). Only a reset
 * makes room earlier, and `reset()` here drops the entry. So until T, requests that contain the bucket
 * are rejected here without calling the inner store (a rejected request charges nothing, so skipping
 * the store changes no count). Resets made through another replica are not seen here: this replica may
 * keep rejecting that bucket until T.
 *
 * What a locally rejected request reports:
 *   - the blocked bucket: remaining 0, its `resetAt` and `retryAt` as last seen (headers stay right);
 *   - its other buckets: the state last seen for them in the store's answer that blocked a bucket of
 *     this request (they were not charged then either, and are not now); a bucket never seen beside it
 *     is reported full (remaining = limit, reset now), which keeps the blocked bucket the one chosen for
 *     the X-RateLimit headers.
 *
 * With leases (docs/leases.md) a block can outlast the shortage: tokens another gateway holds were
 * counted as spent when this one was refused, and come back when that gateway gives back what it did not
 * spend (within a second or so). So a block is re-checked: once `recheckMs` has passed, one request goes
 * to the store (the others stay blocked) and its answer lifts or renews the block. Not while the fault
 * policy answers (`storeDecides` false): what was known full then stays refused until `retryAt`.
 *
 * Times: entries hold store-clock times (Redis TIME); the local clock is mapped to the store's by the
 * offset seen on the last answer, so a replica with a skewed clock neither lifts nor extends a block.
 * Memory: at most `maxEntries` entries, oldest evicted first, expired ones dropped when met.
 */
import type { BucketSpec, BucketState, ConsumeOutcome, Store } from './types.js';

export interface BlockedCacheOptions {
  /** Entries kept at most (default 100 000: ~ a few tens of MB in the worst case). */
  readonly maxEntries?: number;
  /** The local clock (tests). */
  readonly now?: () => number;
  /** Told of each request rejected here without calling the inner store (metrics). */
  readonly onLocalRejection?: () => void;
  /** One request per block goes to the store this often, before its retryAt (leases; default: never). */
  readonly recheckMs?: number;
  /** False while the fault policy answers instead of the store: no re-check then (default: always true). */
  readonly storeDecides?: () => boolean;
}

export interface BlockedCacheStore extends Store {
  /** A blocked bucket's refusal, or the inner store's synchronous answer (a held lease); else undefined. */
  consumeLocal(specs: readonly BucketSpec[]): ConsumeOutcome | undefined;
  /** Blocked buckets currently held. */
  readonly size: number;
  /** Requests rejected locally without calling the inner store, since start. */
  readonly localRejections: number;
}

interface Entry {
  readonly retryAt: number;
  /** Store time from which the next request goes to the store to re-check the block (Infinity: never). */
  recheckAt: number;
  readonly resetAt: number;
  /**
   * The blocked bucket as it was charged (one of `specs`): the block holds for requests of its cost on
   * the same rule shape only. A costlier request would be blocked too but until a later time we cannot
   * compute here, and a reload may change the rule.
   */
  readonly spec: BucketSpec;
  /** The request and answer that produced the block: its other buckets' last seen states. */
  readonly specs: readonly BucketSpec[];
  readonly states: readonly BucketState[];
}

class BlockedCache implements BlockedCacheStore {
  private readonly entries = new Map<string, Entry>();
  private readonly max: number;
  private readonly clock: () => number;
  /** Store clock − local clock, as of the last answer. */
  private offset = 0;
  private rejections = 0;
  private readonly onLocalRejection: (() => void) | undefined;
  private readonly recheckMs: number;
  private readonly storeDecides: () => boolean;

  constructor(
    private readonly inner: Store,
    opts: BlockedCacheOptions,
  ) {
    this.max = Math.max(1, opts.maxEntries ?? 100_000);
    this.clock = opts.now ?? Date.now;
    this.onLocalRejection = opts.onLocalRejection;
    this.recheckMs = opts.recheckMs ?? Infinity;
    this.storeDecides = opts.storeDecides ?? (() => true);
  }

  get size(): number {
    return this.entries.size;
  }

  get localRejections(): number {
    return this.rejections;
  }

  consume(specs: readonly BucketSpec[]): Promise<ConsumeOutcome> {
    const now = this.clock() + this.offset;
    const hit = this.blockingAny(specs, now);
    if (hit !== undefined) {
      if (!this.due(hit, now)) return Promise.resolve(this.rejectLocally(specs, hit, now));
      // This request re-checks the block; the next ones stay blocked until its answer, or recheckMs.
      hit.recheckAt = now + this.recheckMs;
      return this.inner.consume(specs).then((out) => this.learn(specs, out));
    }
    // A decision the inner store makes without I/O (a held lease) takes no promise hop through here.
    const local = this.inner.consumeLocal?.(specs);
    if (local !== undefined) return Promise.resolve(this.learn(specs, local));
    return this.inner.consume(specs).then((out) => this.learn(specs, out));
  }

  consumeLocal(specs: readonly BucketSpec[]): ConsumeOutcome | undefined {
    const now = this.clock() + this.offset;
    const hit = this.blockingAny(specs, now);
    // A block due for its re-check: consume() sends the request to the store.
    if (hit !== undefined) return this.due(hit, now) ? undefined : this.rejectLocally(specs, hit, now);
    const local = this.inner.consumeLocal?.(specs);
    return local === undefined ? undefined : this.learn(specs, local);
  }

  /** The entry that blocks one of the request's non-shadow buckets now, if any. */
  private blockingAny(specs: readonly BucketSpec[], now: number): Entry | undefined {
    if (this.entries.size === 0) return undefined;
    for (const spec of specs) {
      if (spec.shadow) continue;
      const e = this.blocking(spec, now);
      if (e) return e;
    }
    return undefined;
  }

  /** Is the block due for a re-check by the store (leases may have given its tokens back)? */
  private due(e: Entry, now: number): boolean {
    return e.recheckAt <= now && this.storeDecides();
  }

  /** The buckets have room again: a block learnt for one of them since must not refuse until its retry time. */
  refund(specs: readonly BucketSpec[], outcome: ConsumeOutcome): Promise<void> {
    if (this.entries.size > 0) for (const spec of specs) this.entries.delete(spec.key);
    return this.inner.refund?.(specs, outcome) ?? Promise.resolve();
  }

  peek(spec: BucketSpec): Promise<BucketState> {
    return this.inner.peek(spec);
  }

  reset(spec: BucketSpec): Promise<void> {
    this.entries.delete(spec.key);
    return this.inner.reset(spec);
  }

  close(): Promise<void> {
    this.entries.clear();
    return this.inner.close();
  }

  /** The entry that blocks this bucket now, if any; drops an entry that no longer applies. */
  private blocking(spec: BucketSpec, now: number): Entry | undefined {
    const e = this.entries.get(spec.key);
    if (!e) return undefined;
    if (e.retryAt <= now) {
      this.entries.delete(spec.key);
      return undefined;
    }
    // Same rule, same cost: a bucket's cost is its rule's, so another one only follows a reload.
    const b = e.spec;
    return b.cost === spec.cost && b.limit === spec.limit && b.periodMs === spec.periodMs && b.algorithm === spec.algorithm ? e : undefined;
  }

  private rejectLocally(specs: readonly BucketSpec[], hit: Entry, now: number): ConsumeOutcome {
    this.rejections++;
    this.onLocalRejection?.();
    const buckets: BucketState[] = new Array(specs.length);
    for (let i = 0; i < specs.length; i++) {
      const spec = specs[i]!;
      const own = spec.shadow ? undefined : this.blocking(spec, now);
      buckets[i] = own
        ? { remaining: 0, resetAt: own.resetAt, limited: true, retryAt: own.retryAt }
        : (lastSeen(hit, spec.key, now) ?? { remaining: spec.limit, resetAt: now, limited: false, retryAt: now });
    }
    return { allowed: false, decider: 'cache', now, buckets };
  }

  private learn(specs: readonly BucketSpec[], out: ConsumeOutcome): ConsumeOutcome {
    this.offset = out.now - this.clock();
    if (out.allowed) {
      // Charged buckets moved on: a block held for them (for another cost) would now report too early
      // a retry time. (A non-shadow bucket can only be limited in a rejected request.)
      if (this.entries.size > 0) for (const spec of specs) this.entries.delete(spec.key);
      return out;
    }
    for (let i = 0; i < specs.length; i++) {
      const spec = specs[i]!;
      const state = out.buckets[i]!;
      // cost > limit can never pass, and its retryAt then moves with time instead of being a fixed
      // point: such a (misconfigured) bucket is left to the store.
      if (spec.shadow || !state.limited || state.retryAt <= out.now || spec.cost > spec.limit) continue;
      // Re-inserting moves the key to the back of the eviction order.
      this.entries.delete(spec.key);
      this.entries.set(spec.key, {
        retryAt: state.retryAt,
        recheckAt: out.now + this.recheckMs,
        resetAt: state.resetAt,
        spec,
        specs,
        states: out.buckets,
      });
      if (this.entries.size > this.max) this.entries.delete(this.entries.keys().next().value!);
    }
    return out;
  }
}

/** A bucket's state as seen beside the blocked one, unless it was itself limited and that has passed. */
function lastSeen(e: Entry, key: string, now: number): BucketState | undefined {
  for (let i = 0; i < e.specs.length; i++) {
    if (e.specs[i]!.key !== key) continue;
    const s = e.states[i]!;
    return s.limited && s.retryAt <= now ? undefined : s;
  }
  return undefined;
}

export function createBlockedCacheStore(inner: Store, opts: BlockedCacheOptions = {}): BlockedCacheStore {
  return new BlockedCache(inner, opts);
}

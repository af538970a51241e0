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
 * policy answers (`storeDecides` false): what was known full then stays refused until `retryAt`. Not
 * while this gateway is the fleet's only one (`othersMayLease` false): nobody else holds a lease, so a
 * flood from many clients, each blocked, costs the store nothing (it cost one call per blocked client
 * per re-check period: every request of a client slower than that).
 *
 * Reads learn too (the early refusal's, before an account is looked up): a read weighs each bucket at
 * the request's own cost, so one that shows a non-shadow bucket limited until T blocks it as a consume
 * would, and one that shows room lifts a block held for it. A flood refused by a read is then answered
 * here, synchronously (`readLocal`), instead of one store call per bucket per request. A store's read
 * carries its clock (Redis TIME), so a gateway that meets a flood fresh learns from its first read; a
 * read made of peeks carries none and teaches only once an answer has told the clocks' offset.
 *
 * Times: entries hold store-clock times (Redis TIME); the local clock is mapped to the store's by the
 * offset seen on the last answer, so a replica with a skewed clock neither lifts nor extends a block.
 * Memory: at most `maxEntries` entries, oldest evicted first, expired ones dropped when met.
 */
import type { BucketSpec, BucketState, ConsumeOutcome, Store } from './types.js';
import { readThrough } from './read.js';
import { lastSeen, sameShape, type Block } from './blocked-entry.js';

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
  /** False while this gateway is the fleet's only one: nobody else holds a lease (default: always true). */
  readonly othersMayLease?: () => boolean;
}

export interface BlockedCacheStore extends Store {
  /** A blocked bucket's refusal, or the inner store's synchronous answer (a held lease); else undefined. */
  consumeLocal(specs: readonly BucketSpec[]): ConsumeOutcome | undefined;
  /** A blocked bucket's refusal, read without charging; else the inner store's synchronous read, if any. */
  readLocal(specs: readonly BucketSpec[]): ConsumeOutcome | undefined;
  /** Reads the buckets (the inner store's read, or a peek of each); learns the blocks a read shows. */
  read(specs: readonly BucketSpec[]): Promise<ConsumeOutcome>;
  /** Blocked buckets currently held. */
  readonly size: number;
  /** Requests rejected locally without calling the inner store, since start. */
  readonly localRejections: number;
}

class BlockedCache implements BlockedCacheStore {
  private readonly entries = new Map<string, Block>();
  private readonly max: number;
  private readonly clock: () => number;
  /** Store clock − local clock, as of the last answer. */
  private offset = 0;
  /** An answer (or a store's timed read) has set `offset`: before it, a read of peeks teaches nothing. */
  private synced = false;
  private rejections = 0;
  /** Where blockingAny found its hit (read by rejectLocally right after, in the same turn). */
  private hitAt = 0;
  private readonly onLocalRejection: (() => void) | undefined;
  private readonly recheckMs: number;
  private readonly storeDecides: () => boolean;
  private readonly othersMayLease: () => boolean;

  constructor(
    private readonly inner: Store,
    opts: BlockedCacheOptions,
  ) {
    this.max = Math.max(1, opts.maxEntries ?? 100_000);
    this.clock = opts.now ?? Date.now;
    this.onLocalRejection = opts.onLocalRejection;
    this.recheckMs = opts.recheckMs ?? Infinity;
    this.storeDecides = opts.storeDecides ?? (() => true);
    this.othersMayLease = opts.othersMayLease ?? (() => true);
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

  readLocal(specs: readonly BucketSpec[]): ConsumeOutcome | undefined {
    const now = this.clock() + this.offset;
    const hit = this.blockingAny(specs, now);
    if (hit === undefined) return this.inner.readLocal?.(specs);
    if (!this.due(hit, now)) return this.rejectLocally(specs, hit, now);
    // Due for its re-check: the caller reads from the store; the next requests stay blocked meanwhile.
    hit.recheckAt = now + this.recheckMs;
    return undefined;
  }

  read(specs: readonly BucketSpec[]): Promise<ConsumeOutcome> {
    // The inner store's read carries its clock (a fresh gateway learns blocks from its first reads);
    // peeks carry none, and are read at this cache's view of it.
    const timed = this.inner.read !== undefined;
    return readThrough(this.inner, specs, () => this.clock() + this.offset).then((out) => {
      if (timed && out.decider !== 'fallback') this.sync(out.now);
      return this.learnRead(specs, out);
    });
  }

  /** The store's clock as an answer tells it: local times map to the store's by this offset. */
  private sync(storeNow: number): void {
    this.offset = storeNow - this.clock();
    this.synced = true;
  }

  /**
   * The entry that blocks one of the request's non-shadow buckets now, if any; `hitAt` is then its
   * index (the buckets before it block nothing: rejectLocally looks only from there on).
   */
  private blockingAny(specs: readonly BucketSpec[], now: number): Block | undefined {
    if (this.entries.size === 0) return undefined;
    for (let i = 0; i < specs.length; i++) {
      const spec = specs[i]!;
      if (spec.shadow) continue;
      const e = this.blocking(spec, now);
      if (e) {
        this.hitAt = i;
        return e;
      }
    }
    return undefined;
  }

  /** Is the block due for a re-check by the store (another gateway's lease may have given its tokens back)? */
  private due(e: Block, now: number): boolean {
    return e.recheckAt <= now && this.storeDecides() && this.othersMayLease();
  }

  /** The buckets have room again: a block learnt for one of them since must not refuse until its retry time. */
  refund(specs: readonly BucketSpec[], outcome: ConsumeOutcome): Promise<void> {
    if (this.entries.size > 0) for (const spec of specs) this.entries.delete(spec.key);
    return this.inner.refund?.(specs, outcome) ?? Promise.resolve();
  }

  peek(spec: BucketSpec): Promise<BucketState> {
    return this.inner.peek(spec);
  }

  /**
   * What a read shows: a block for each limited bucket (as a refused consume teaches), and no block for
   * a bucket with room. Only from the store's own answers (not the fault policy's), once clocks are synced.
   */
  private learnRead(specs: readonly BucketSpec[], out: ConsumeOutcome): ConsumeOutcome {
    if (!this.synced || !this.storeDecides()) return out;
    for (let i = 0; i < specs.length && this.entries.size > 0; i++) {
      const e = out.buckets[i]!.limited ? undefined : this.entries.get(specs[i]!.key);
      // Room for this cost lifts a block of this cost (one of another cost says nothing of it).
      if (e !== undefined && sameShape(e.spec, specs[i]!)) this.entries.delete(specs[i]!.key);
    }
    if (!out.allowed) this.learnBlocks(specs, out);
    return out;
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
  private blocking(spec: BucketSpec, now: number): Block | undefined {
    const e = this.entries.get(spec.key);
    if (!e) return undefined;
    if (e.retryAt <= now) {
      this.entries.delete(spec.key);
      return undefined;
    }
    return sameShape(e.spec, spec) ? e : undefined;
  }

  private rejectLocally(specs: readonly BucketSpec[], hit: Block, now: number): ConsumeOutcome {
    this.rejections++;
    this.onLocalRejection?.();
    const buckets: BucketState[] = new Array(specs.length);
    // Read just now by blockingAny, in this same turn: the hit's index, and none blocking before it.
    const at = this.hitAt;
    for (let i = 0; i < specs.length; i++) {
      const spec = specs[i]!;
      const own = i === at ? hit : spec.shadow || i < at ? undefined : this.blocking(spec, now);
      buckets[i] = own
        ? { remaining: 0, resetAt: own.resetAt, limited: true, retryAt: own.retryAt }
        : (lastSeen(hit, spec.key, now) ?? { remaining: spec.limit, resetAt: now, limited: false, retryAt: now });
    }
    return { allowed: false, decider: 'cache', now, buckets };
  }

  private learn(specs: readonly BucketSpec[], out: ConsumeOutcome): ConsumeOutcome {
    this.sync(out.now);
    if (out.allowed) {
      // Charged buckets moved on: a block held for them (for another cost) would now report too early
      // a retry time. (A non-shadow bucket can only be limited in a rejected request.)
      if (this.entries.size > 0) for (const spec of specs) this.entries.delete(spec.key);
      return out;
    }
    this.learnBlocks(specs, out);
    return out;
  }

  /** A block for each non-shadow bucket `out` (a refusal, or a read) shows limited until a fixed time. */
  private learnBlocks(specs: readonly BucketSpec[], out: ConsumeOutcome): void {
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
  }
}

export function createBlockedCacheStore(inner: Store, opts: BlockedCacheOptions = {}): BlockedCacheStore {
  return new BlockedCache(inner, opts);
}

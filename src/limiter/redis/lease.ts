/**
 * @module Leased quotas: a gateway takes several tokens of a bucket from the shared store in one call
 * (the store counts them as consumed at once) and admits the next requests from them locally, so a busy
 * key costs the store one call per lease instead of one per request.
 *
 * A request is admitted here when every one of its buckets holds a valid lease with at least its cost;
 * all are then charged locally. Otherwise the buckets without one go to the inner store, which charges
 * them (the request stays all-or-nothing: the leased buckets' tokens are reserved meanwhile) and adds
 * the extra tokens this gateway asks for, as far as they fit (codec.ts / lua/lib.lua): never more
 * than what remains after the charge ÷ `share` (2 × the number of gateways), and whole multiples of the
 * request's cost (a lease short of one request would strand its tokens), so as a bucket nears its
 * limit leases shrink and the last tokens go one by one. The size asked for follows this gateway's rate
 * on the key (lease-entry.ts). A store that grants nothing (the fault policy's fallback) leaves the
 * lease empty: no decision here ever spends a token the store did not count. The blocked-bucket cache
 * sits in front, so a flood of refusals never reaches this layer.
 *
 * Lifetimes (bounds in docs/leases.md): a lease of a window algorithm is spent only in the window it was
 * counted in; any lease at most `maxAgeMs` after its first tokens were counted. Unspent tokens go back
 * to the store (refund.lua, which never gives back more than the charge still weighs) when the lease
 * expires, when the key is idle for `idleMs`, when the rule changed (reload), and when the store closes
 * (drain). A failed give-back only leaves tokens stranded until the window or refill passes them.
 */
import { systemClock, type Clock } from '../clock.js';
import { LeaseEntry, RecentKeys, sameRule } from './lease-entry.js';
import { leaseArrived, takeIn, unreserve } from './lease-outcome.js';
import { refundLeased } from './lease-refund.js';
import type { LeaseOptions, LeaseStore } from './lease-types.js';
import type { BucketSpec, BucketState, ConsumeOutcome, Store } from '../types.js';
import { readThrough } from '../read.js';

export type { LeaseOptions, LeaseStore } from './lease-types.js';

/** The leases found by the fast path; reused, since the path is synchronous. */
const found: LeaseEntry[] = [];

class Leases implements LeaseStore {
  localAdmissions = 0;
  private readonly entries = new Map<string, LeaseEntry>();
  private readonly recent = new RecentKeys();
  private readonly clock: Clock;
  private share: number;
  private readonly targetMs: number;
  private readonly maxAgeMs: number;
  private readonly idleMs: number;
  private readonly maxEntries: number;
  private readonly sweepEveryMs: number;
  /** Store clock − local clock, as of the last answer. */
  private offset = 0;
  private cancelSweep: (() => void) | null = null;
  private closed = false;
  private readonly pendingGiveBacks = new Set<Promise<unknown>>();

  constructor(
    private readonly inner: Store,
    private readonly opts: LeaseOptions,
  ) {
    this.clock = opts.clock ?? systemClock;
    this.share = 2 * Math.max(1, opts.gateways ?? 2);
    this.targetMs = opts.targetMs ?? 500;
    this.maxAgeMs = opts.maxAgeMs ?? 1_000;
    this.idleMs = opts.idleMs ?? 1_000;
    this.maxEntries = opts.maxEntries ?? 100_000;
    this.sweepEveryMs = Math.max(50, Math.min(this.idleMs, this.maxAgeMs) / 4);
  }

  get returnedWithinMs(): number {
    return this.maxAgeMs + this.sweepEveryMs;
  }

  setGateways(n: number): void {
    this.share = 2 * Math.max(1, n);
  }

  heldTokens(key?: string): number {
    if (key !== undefined) return this.entries.get(key)?.tokens ?? 0;
    let n = 0;
    for (const e of this.entries.values()) n += e.tokens;
    return n;
  }

  async settled(): Promise<void> {
    await Promise.all(this.pendingGiveBacks);
  }

  consume(specs: readonly BucketSpec[]): Promise<ConsumeOutcome> {
    return this.decide(specs, false);
  }

  consumeLocal(specs: readonly BucketSpec[]): ConsumeOutcome | undefined {
    const now = this.clock.now();
    return this.firstUnheld(specs, now) === -1 ? this.admitLocally(specs, now) : undefined;
  }

  /** `waited`: this request already waited once for a lease in flight; it goes to the store now. */
  private decide(specs: readonly BucketSpec[], waited: boolean): Promise<ConsumeOutcome> {
    const now = this.clock.now();
    const i = this.firstUnheld(specs, now);
    if (i === -1) return Promise.resolve(this.admitLocally(specs, now));
    // A lease for this bucket is on its way: wait for it (no longer than that store call) rather than
    // make a store call of our own, which would cost as long and the store more.
    const pending = i < specs.length ? (this.entries.get(specs[i]!.key)?.pending ?? null) : null;
    if (pending !== null && !waited) return pending.then(() => this.decide(specs, true));
    return this.viaStore(specs, now);
  }

  /**
   * −1 when every bucket holds a valid lease with room for its cost under the same rule (those leases
   * are then in `found`), else the index of the first that does not (`specs.length` when no lease is held).
   */
  private firstUnheld(specs: readonly BucketSpec[], now: number): number {
    const n = specs.length;
    if (n === 0 || this.entries.size === 0) return n;
    for (let i = 0; i < n; i++) {
      const spec = specs[i]!;
      const e = this.entries.get(spec.key);
      if (e === undefined || e.tokens < spec.cost || e.validUntil <= now || !sameRule(e.spec, spec)) return i;
      found[i] = e;
    }
    return -1;
  }

  /** Every bucket had a lease: spend them and answer from what the store said last, plus what is held. */
  private admitLocally(specs: readonly BucketSpec[], now: number): ConsumeOutcome {
    this.localAdmissions++;
    const storeNow = now + this.offset;
    const buckets: BucketState[] = new Array(specs.length);
    for (let i = 0; i < specs.length; i++) {
      const e = found[i]!;
      e.tokens -= specs[i]!.cost;
      e.hits++;
      e.lastUsed = now;
      buckets[i] = { remaining: e.storeRemaining + e.tokens, resetAt: e.resetAt, limited: false, retryAt: storeNow };
    }
    return { allowed: true, decider: 'lease', now: storeNow, buckets };
  }

  /**
   * One store call for the buckets without a lease, asking for the leases this gateway's rate calls for;
   * the buckets with one are charged from it (reserved during the call, put back if the request is
   * refused), so a token this gateway holds is never kept from a request the store would admit.
   */
  private viaStore(specs: readonly BucketSpec[], now: number, retried = false): Promise<ConsumeOutcome> {
    const n = specs.length;
    const entries: (LeaseEntry | undefined)[] = new Array(n);
    /** Per bucket: the stock its cost was reserved from, or −1 when it goes to the store. */
    const reserved: number[] = new Array(n);
    const asked: BucketSpec[] = [];
    const index: number[] = [];
    let tracked = false;
    for (let i = 0; i < n; i++) {
      const spec = specs[i]!;
      let e = this.entries.get(spec.key);
      if (e !== undefined && !sameRule(e.spec, spec)) {
        // The rule changed (a reload): what the old lease holds goes back, the key starts afresh.
        this.release(e, now);
        this.entries.delete(spec.key);
        e = undefined;
      }
      if (e !== undefined && e.validUntil <= now) this.release(e, now);
      if (e === undefined && this.entries.size < this.maxEntries) {
        const last = this.recent.seen(spec.key, now, this.targetMs);
        if (last >= 0) {
          e = new LeaseEntry(spec, now);
          e.lastCallAt = last;
          this.entries.set(spec.key, e);
          this.scheduleSweep();
        }
      }
      entries[i] = e;
      if (e !== undefined) tracked = true;
      if (e !== undefined && e.tokens >= spec.cost) {
        e.tokens -= spec.cost;
        reserved[i] = e.stock;
        continue;
      }
      reserved[i] = -1;
      const want = e === undefined ? 0 : e.want(now, this.targetMs, spec);
      asked.push(want > 0 ? { ...spec, lease: want, leaseShare: this.share } : spec);
      index.push(i);
    }
    // No bucket with lease state (a cold key, the many-client case): the store decides, as without leases.
    if (!tracked) return this.inner.consume(specs);
    return this.call(specs, now, retried, entries, reserved, asked, index);
  }

  private async call(
    specs: readonly BucketSpec[],
    now: number,
    retried: boolean,
    entries: readonly (LeaseEntry | undefined)[],
    reserved: readonly number[],
    asked: readonly BucketSpec[],
    index: readonly number[],
  ): Promise<ConsumeOutcome> {
    const n = specs.length;
    // Requests for these keys meanwhile wait for this answer (settled once the leases are in place).
    let settle: (() => void) | null = null;
    let answered: Promise<void> | null = null;
    for (let k = 0; k < asked.length; k++) {
      const i = index[k]!;
      if (asked[k] === specs[i]) continue;
      answered ??= new Promise<void>((resolve) => (settle = resolve));
      entries[i]!.pending = answered;
    }
    try {
      // Every bucket had tokens after all (a waiter whose lease arrived): no store call.
      const out: ConsumeOutcome =
        asked.length === 0
          ? { allowed: true, decider: 'lease', now: now + this.offset, buckets: [] }
          : await this.inner.consume(asked);
      if (!out.allowed) unreserve(specs, entries, reserved);
      const at = this.clock.now();
      this.offset = out.now - at;
      const outcome = takeIn(at, this.maxAgeMs, specs, entries, reserved, index, out, now);
      // Refused for a bucket whose lease arrived meanwhile (an earlier call's answer): the tokens are
      // here, so try once more rather than strand them behind the blocked-bucket cache.
      if (!outcome.allowed && !retried && leaseArrived(specs, entries, index, out))
        return this.viaStore(specs, this.clock.now(), true);
      return outcome;
    } catch (err) {
      unreserve(specs, entries, reserved);
      throw err;
    } finally {
      if (answered !== null) {
        for (let i = 0; i < n; i++) if (entries[i]?.pending === answered) entries[i]!.pending = null;
        settle!();
      }
    }
  }

  /** See lease-refund.ts. */
  refund(specs: readonly BucketSpec[], outcome: ConsumeOutcome): Promise<void> {
    const { entries, inner, clock, maxAgeMs, closed } = this;
    return refundLeased({ entries, inner, clock, maxAgeMs, closed }, specs, outcome);
  }

  peek(spec: BucketSpec): Promise<BucketState> {
    return this.inner.peek(spec);
  }
  read(specs: readonly BucketSpec[]): Promise<ConsumeOutcome> {
    return readThrough(this.inner, specs, () => this.clock.now());
  }

  reset(spec: BucketSpec): Promise<void> {
    this.entries.delete(spec.key);
    return this.inner.reset(spec);
  }

  sweep(): void {
    const now = this.clock.now();
    for (const [key, e] of this.entries) {
      const idle = now - e.lastUsed >= this.idleMs;
      if (e.tokens > 0 && (idle || e.validUntil <= now)) this.release(e, now);
      if (idle && e.pending === null) this.entries.delete(key);
    }
  }

  /** Drain: every unspent token goes back before the inner store closes (bounded by its timeout). */
  async close(): Promise<void> {
    this.closed = true;
    this.cancelSweep?.();
    this.cancelSweep = null;
    const now = this.clock.now();
    for (const e of this.entries.values()) this.release(e, now);
    this.entries.clear();
    if (this.pendingGiveBacks.size > 0) await Promise.all(this.pendingGiveBacks);
    await this.inner.close();
  }

  /** Takes the lease's tokens out of use and gives them back where that still changes a count. */
  private release(e: LeaseEntry, now: number): void {
    const tokens = e.tokens;
    e.tokens = 0;
    e.validUntil = 0;
    e.stock++;
    if (tokens <= 0 || !e.worthGivingBack(now + this.offset)) return;
    const p = this.opts.giveBack(e.spec, tokens, e.chargedAt).catch(() => undefined);
    this.pendingGiveBacks.add(p);
    void p.then(() => this.pendingGiveBacks.delete(p));
  }

  /** The sweep runs only while some key has lease state: an idle gateway, or one whose keys are all cold, has no timer. */
  private scheduleSweep(): void {
    if (this.cancelSweep !== null || this.closed) return;
    this.cancelSweep = this.clock.after(this.sweepEveryMs, () => {
      this.cancelSweep = null;
      this.sweep();
      if (this.entries.size > 0) this.scheduleSweep();
    });
  }
}

export function createLeaseStore(inner: Store, opts: LeaseOptions): LeaseStore {
  return new Leases(inner, opts);
}

/**
 * @module One key's lease (lease.ts): the tokens this gateway holds, until when they may be spent, what
 * the store said last, and this gateway's rate on the key, which sizes the next lease.
 */
import type { BucketSpec, BucketState } from '../types.js';

/** Same rule shape: a lease taken under one rule is never spent under another (a reload changed it). */
export function sameRule(a: BucketSpec, b: BucketSpec): boolean {
  return (
    a === b ||
    (a.limit === b.limit &&
      a.periodMs === b.periodMs &&
      a.algorithm === b.algorithm &&
      a.cost === b.cost &&
      a.shadow === b.shadow)
  );
}

/** The fixed window a store time falls in (fixed and sliding windows count per window of the period). */
export function windowStart(spec: BucketSpec, storeMs: number): number {
  return storeMs - (storeMs % spec.periodMs);
}

export class LeaseEntry {
  /** Tokens held and not spent. */
  tokens = 0;
  /**
   * Counts the stocks of tokens this entry has held: a new stock, or the end of one, changes it, so a
   * token reserved for a request in flight goes back only into the stock it came from.
   */
  stock = 0;
  /** Local time until which the tokens may be spent (0: none may). */
  validUntil = 0;
  /** Store time of the charge of the oldest tokens held: the give-back needs it. */
  chargedAt = 0;
  /** The store's remaining after the last charge (which counts every lease as spent). */
  storeRemaining = 0;
  resetAt = 0;
  /** Local time of the last store call for the key (−1: none yet) and requests admitted here since. */
  lastCallAt = -1;
  hits = 0;
  lastUsed: number;
  /**
   * A call asking for a lease is in flight (settles when it is answered, never rejects): requests for
   * the key meanwhile wait for it and try the lease again rather than each call the store.
   */
  pending: Promise<void> | null = null;

  constructor(
    readonly spec: BucketSpec,
    now: number,
  ) {
    this.lastUsed = now;
  }

  /**
   * Extra tokens to ask for with this request: this gateway's rate on the key since the last store call
   * (the requests admitted here, plus this one) times `targetMs`, less what is still held. None for a key
   * seen once, or seen less often than once per `targetMs`.
   */
  want(now: number, targetMs: number, spec: BucketSpec): number {
    if (this.pending !== null || this.lastCallAt < 0) return 0;
    const perMs = (this.hits + 1) / Math.max(1, now - this.lastCallAt);
    const stock = Math.min(spec.limit, Math.floor(perMs * targetMs) * spec.cost);
    const held = this.validUntil > now ? this.tokens : 0;
    return Math.max(0, stock - held);
  }

  /** A store call for the key answered at local time `at`. */
  called(at: number): void {
    this.lastCallAt = at;
    this.lastUsed = at;
    this.hits = 0;
  }

  /**
   * The store charged `extra` tokens for this gateway beyond the request (`b`: the bucket after them,
   * at store time `storeNow`); `since` is the local time the call was made, which maps the store's
   * times to local ones conservatively (the charge happened after it).
   */
  granted(extra: number, b: BucketState, storeNow: number, since: number, maxAgeMs: number): void {
    this.storeRemaining = b.remaining;
    this.resetAt = b.resetAt;
    if (extra <= 0) return;
    const spec = this.spec;
    const windows = spec.algorithm !== 'token-bucket';
    // Tokens of another window cannot be mixed in: what was held is dropped (its window is over).
    if (this.tokens > 0 && windows && windowStart(spec, this.chargedAt) !== windowStart(spec, storeNow))
      this.tokens = 0;
    if (this.tokens <= 0) {
      this.tokens = 0;
      this.stock++;
      this.chargedAt = storeNow;
      let until = since + maxAgeMs;
      // A window's tokens are spent in that window only: its end, mapped to the local clock.
      if (windows) until = Math.min(until, since + (windowStart(spec, storeNow) + spec.periodMs - storeNow));
      this.validUntil = until;
    }
    this.tokens += extra;
  }

  /** Does giving the tokens back at store time `storeNow` still change a count? */
  worthGivingBack(storeNow: number): boolean {
    const spec = this.spec;
    if (spec.algorithm === 'token-bucket') return true; // refund.lua gives back what the charge still weighs
    const end = windowStart(spec, this.chargedAt) + spec.periodMs;
    // A sliding window's count still weighs through the next window; a fixed window's ends with it.
    return storeNow < (spec.algorithm === 'sliding-window' ? end + spec.periodMs : end);
  }
}

/**
 * When keys without a lease were last sent to the store, in a fixed table indexed by a hash of the key
 * (a slot keeps the last key's full hash: another key there is not taken for it, so a cold key is not
 * leased tokens it would only give back; a lease is bounded by the store anyway). A key
 * gets a LeaseEntry only when it comes back within the lease target: a client seen once, or seldom,
 * costs no object, no map entry and no sweep (the many-client case).
 */
export class RecentKeys {
  private readonly at: Float64Array;
  /** The full 32-bit hash of the key noted in each slot: another key in the slot is not taken for it. */
  private readonly hash: Uint32Array;
  private readonly mask: number;

  constructor(slots = 8192) {
    this.at = new Float64Array(slots);
    this.hash = new Uint32Array(slots);
    this.mask = slots - 1;
  }

  /** The last time `key` was noted, when within `windowMs` of `now` (else −1); notes `now` for it. */
  seen(key: string, now: number, windowMs: number): number {
    let h = 0x811c9dc5;
    for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
    h >>>= 0;
    const slot = h & this.mask;
    const last = this.hash[slot] === h ? this.at[slot]! : 0;
    this.at[slot] = now;
    this.hash[slot] = h;
    return last > 0 && now - last < windowMs ? last : -1;
  }
}

/**
 * @module The local count of `onError: local` buckets while their Redis master fails, made so that it
 * does not stack on what Redis already counted, neither during the outage nor after it.
 *
 * Seeding: a bucket first counted locally starts from what the store last reported for it on this
 * gateway: its `remaining`, split by `store.gateways` (rounded down), so that the gateways together admit
 * about what the store still had room for, not a fresh limit each on top of it. A bucket this gateway
 * never saw (or whose reported window has ended) starts with its share of the limit. A fixed window's
 * local room is also what is left of this gateway's share after what it already admitted in that window
 * through the store (its leases' tokens included): a gateway that took more than its share before the
 * fault gets no more, so the fleet's window stays within the limit however stale its view of the store's
 * remaining (issue 37: two gateways admitted 32 + 33 of 50, each past its 25). Every later
 * window of the outage gives each gateway its share too: the local count runs at limit ÷ gateways
 * (rounded up), so a fleet admits about the limit per window however long the master is out.
 *
 * Write-back: what a bucket admitted locally is a debt, charged to the store (as a shadow charge: it
 * never rejects, and it is capped at the room left) before the store's next decision for that bucket, so
 * that after the master is back (or its replica promoted) the store does not hand out its own remaining
 * room again. Then the local bucket is forgotten, and the next outage seeds afresh.
 *
 * The policy itself (`decideWithoutStore`): in one request `deny` wins (StoreUnavailableError: the
 * gateway answers 503), then `local` buckets are counted here, and `allow` buckets are reported full.
 *
 * Bounds: the last-seen table keeps at most `maxKeys` buckets (oldest first out); its cost on the hot
 * path is one Map write per `local` bucket per store decision.
 */
import { StoreUnavailableError, type BucketSpec, type BucketState, type ConsumeOutcome, type Store } from './types.js';

interface Seen {
  remaining: number;
  /** Store clock: after this, the reported remaining no longer holds. */
  resetAt: number;
  /** Fixed window: what this gateway was charged in the window ending at `resetAt` (costs and lease tokens). */
  mine: number;
}

export interface Touched {
  readonly spec: BucketSpec;
  /** Cost admitted locally and not yet written to the store. */
  debt: number;
  /** Fixed window: the end of the window the debt was admitted in. */
  window: number | undefined;
  flushing: boolean;
  /** The seed charge, which every local count of this bucket waits for. */
  readonly seeded: Promise<unknown>;
}

export class LocalFallback {
  private readonly seen = new Map<string, Seen>();
  private readonly touched = new Map<string, Touched>();
  private gateways: number;
  private readonly maxKeys: number;

  constructor(
    /** A MemoryStore. */
    readonly store: Store,
    opts: { gateways?: number; maxKeys?: number; now?: () => number } = {},
  ) {
    this.gateways = Math.max(1, Math.floor(opts.gateways ?? 1));
    this.maxKeys = Math.max(1, opts.maxKeys ?? 100_000);
    this.now = opts.now ?? Date.now;
  }

  private readonly now: () => number;

  /** The gateways sharing the store now (the fleet's live count): buckets are counted at the new share from now on. */
  setGateways(n: number): void {
    this.gateways = Math.max(1, Math.floor(n));
  }

  /** Remembers what the store reported for the `local` buckets of a decision. */
  remember(specs: readonly BucketSpec[], out: ConsumeOutcome): void {
    for (let i = 0; i < specs.length; i++) {
      const spec = specs[i]!;
      if (spec.onError !== 'local') continue;
      const b = out.buckets[i];
      if (b === undefined) continue;
      const charged = out.allowed && !b.limited ? spec.cost + (b.leased ?? 0) : 0;
      const last = this.seen.get(spec.key);
      if (last !== undefined) {
        // A fixed window's charges add up within their window; a new window (or another algorithm) starts afresh.
        last.mine = last.resetAt === b.resetAt && spec.algorithm === 'fixed-window' ? last.mine + charged : charged;
        last.remaining = b.remaining;
        last.resetAt = b.resetAt;
        continue;
      }
      if (this.seen.size >= this.maxKeys) this.seen.delete(this.seen.keys().next().value!);
      this.seen.set(spec.key, { remaining: b.remaining, resetAt: b.resetAt, mine: charged });
    }
  }

  /**
   * Counts `specs` (all `local`) in the local store, each at this gateway's share of its limit
   * (limit ÷ gateways, rounded up: an outage longer than a window does not give every gateway the whole
   * limit in each new window), seeding the buckets it meets for the first time.
   */
  async consume(specs: readonly BucketSpec[]): Promise<ConsumeOutcome> {
    const shares = specs.map((s) => this.shareOf(s));
    for (const spec of shares) await (this.touched.get(spec.key) ?? this.seed(spec)).seeded;
    const out = await this.store.consume(shares);
    if (!out.allowed) return out;
    for (let i = 0; i < shares.length; i++) {
      const t = this.touched.get(shares[i]!.key)!;
      const resetAt = out.buckets[i]!.resetAt;
      // A fixed window's debt is owed to its own window only: a new window starts it afresh.
      if (shares[i]!.algorithm === 'fixed-window' && resetAt !== t.window) {
        t.window = resetAt;
        t.debt = 0;
      }
      t.debt += shares[i]!.cost;
    }
    return out;
  }

  private shareOf(spec: BucketSpec): BucketSpec {
    return this.gateways === 1 ? spec : { ...spec, limit: Math.ceil(spec.limit / this.gateways) };
  }

  /** `spec` is at this gateway's share already. */
  private seed(spec: BucketSpec): Touched {
    const last = this.seen.get(spec.key);
    // What the store had left, split between the gateways and rounded down (their shares never add up
    // to more than it had); a bucket never reported (or whose window has ended) starts with its share.
    const fresh = last !== undefined && last.resetAt > this.now();
    const share = fresh ? Math.floor(Math.max(0, last.remaining) / this.gateways) : spec.limit;
    // What this gateway already took of its share in this fixed window counts against it.
    const mine = fresh && spec.algorithm === 'fixed-window' ? last.mine : 0;
    const room = Math.max(0, Math.min(share, spec.limit - mine));
    const used = spec.limit - room;
    const t: Touched = {
      spec,
      debt: 0,
      window: undefined,
      flushing: false,
      seeded: used > 0 ? this.store.consume([{ ...spec, cost: used, shadow: true }]) : Promise.resolve(),
    };
    this.touched.set(spec.key, t);
    return t;
  }

  /**
   * The debts of these buckets, marked as being written (or null: nothing to write, the usual case).
   * Call `written` or `unwritten` with the result once the store has (or has not) taken them.
   */
  debtsOf(specs: readonly BucketSpec[]): Touched[] | null {
    if (this.touched.size === 0) return null;
    let out: Touched[] | null = null;
    for (const spec of specs) {
      const t = this.touched.get(spec.key);
      if (t === undefined || t.flushing) continue;
      t.flushing = true;
      (out ??= []).push(t);
    }
    return out;
  }

  /** The shadow charges that write these debts (only those with something to write). */
  static charges(debts: readonly Touched[], specs: readonly BucketSpec[]): BucketSpec[] {
    const out: BucketSpec[] = [];
    for (const t of debts) {
      if (t.debt <= 0) continue;
      // Charged with the request's own spec (the full limit), not the local share.
      const spec = specs.find((s) => s.key === t.spec.key) ?? t.spec;
      out.push({ ...spec, cost: t.debt, shadow: true });
    }
    return out;
  }

  /** The store has the debts: the local buckets are forgotten. */
  async written(debts: readonly Touched[]): Promise<void> {
    for (const t of debts) {
      this.touched.delete(t.spec.key);
      await this.store.reset(t.spec);
    }
  }

  unwritten(debts: readonly Touched[]): void {
    for (const t of debts) t.flushing = false;
  }

  /** Buckets counted locally and not yet handed back to the store. */
  get pending(): number {
    return this.touched.size;
  }
}

/**
 * Applies each bucket's onError to a request the store could not decide: deny wins (throws), local
 * buckets are counted in `local`, allow buckets fail open. `rejected` is told of a local rejection.
 */
export async function decideWithoutStore(
  local: LocalFallback,
  specs: readonly BucketSpec[],
  cause: unknown,
  now: number,
  rejected: () => void,
): Promise<ConsumeOutcome> {
  let n = 0;
  for (const spec of specs) {
    if (spec.onError === 'deny') throw unavailable(cause);
    if (spec.onError === 'local') n++;
  }
  if (n === 0) return { allowed: true, decider: 'fallback', now, buckets: specs.map((s) => openState(s, now)) };
  const out = await local.consume(n === specs.length ? specs : specs.filter((s) => s.onError === 'local'));
  if (!out.allowed) rejected();
  let k = 0;
  const buckets =
    n === specs.length
      ? out.buckets
      : specs.map((s) => (s.onError === 'local' ? out.buckets[k++]! : openState(s, out.now)));
  return { allowed: out.allowed, decider: 'fallback', now: out.now, buckets };
}

/** A peek the store could not answer, by the bucket's onError. */
export function peekWithoutStore(
  local: LocalFallback,
  spec: BucketSpec,
  cause: unknown,
  now: number,
): Promise<BucketState> {
  if (spec.onError === 'deny') return Promise.reject(unavailable(cause));
  if (spec.onError === 'local') return local.store.peek(spec);
  return Promise.resolve(openState(spec, now));
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

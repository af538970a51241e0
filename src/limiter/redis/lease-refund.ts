/**
 * @module The lease store's refund: an allowed request's charge goes back into the key's lease when the
 * lease may hold it, else to the inner store (lease.ts).
 */
import type { Clock } from '../clock.js';
import { sameRule, windowStart, type LeaseEntry } from './lease-entry.js';
import type { BucketSpec, BucketState, ConsumeOutcome, Store } from '../types.js';

/** What the refund reads of the lease store, as of the call. */
export interface RefundContext {
  readonly entries: ReadonlyMap<string, LeaseEntry>;
  readonly inner: Store;
  readonly clock: Clock;
  readonly maxAgeMs: number;
  /** The lease store is closing: nothing goes back into a lease. */
  readonly closed: boolean;
}

/**
 * Gives back what an allowed request was charged: into the key's lease when the lease may hold those
 * tokens (it is spent or given back as its own, and the headers count it at once), else to the store.
 * A window's tokens fit a valid lease of the same window; a token bucket's fit a lease charged no
 * later than they were, which is known only when the store decided (`now` is then the charge's time;
 * a lease-admitted request's tokens may come from an older lease). A fallback's decision is the
 * fault policy's to refund (it gives back none).
 */
export function refundLeased(ctx: RefundContext, specs: readonly BucketSpec[], outcome: ConsumeOutcome): Promise<void> {
  if (!outcome.allowed) return Promise.resolve();
  const now = ctx.clock.now();
  const rest: BucketSpec[] = [];
  const restBuckets: BucketState[] = [];
  for (let i = 0; i < specs.length; i++) {
    const spec = specs[i]!;
    const b = outcome.buckets[i]!;
    if (b.limited) continue; // a full shadow bucket: not charged
    const e = ctx.entries.get(spec.key);
    if (outcome.decider !== 'fallback' && e !== undefined && holds(ctx.closed, e, spec, outcome, now))
      e.tokens += spec.cost;
    else {
      rest.push(spec);
      restBuckets.push(b);
    }
  }
  const inner = ctx.inner;
  if (rest.length === 0 || inner.refund === undefined) return Promise.resolve();
  if (outcome.decider !== 'lease') return inner.refund(rest, { ...outcome, buckets: restBuckets });
  // A lease-admitted request's charge is the lease's, up to the lease age before `now`: a window's
  // is in `now`'s window (a lease is spent in its own), a token bucket's is counted as that old.
  const tb = rest.map((s) => s.algorithm === 'token-bucket');
  const pick = (want: boolean): [BucketSpec[], BucketState[]] => [
    rest.filter((_, k) => tb[k] === want),
    restBuckets.filter((_, k) => tb[k] === want),
  ];
  const [windows, windowBuckets] = pick(false);
  const [buckets, bucketStates] = pick(true);
  return Promise.all([
    windows.length > 0 ? inner.refund(windows, { ...outcome, buckets: windowBuckets }) : undefined,
    buckets.length > 0
      ? inner.refund(buckets, { ...outcome, now: outcome.now - ctx.maxAgeMs, buckets: bucketStates })
      : undefined,
  ]).then(() => undefined);
}

/** May lease `e` take back the tokens `outcome` charged for `spec`? */
function holds(closed: boolean, e: LeaseEntry, spec: BucketSpec, outcome: ConsumeOutcome, now: number): boolean {
  if (closed || !sameRule(e.spec, spec) || e.validUntil <= now) return false;
  if (spec.algorithm === 'token-bucket') return outcome.decider !== 'lease' && e.chargedAt <= outcome.now;
  return windowStart(spec, e.chargedAt) === windowStart(spec, outcome.now);
}

/**
 * @module A read of a request's buckets as one outcome, through a store's layers: the store's own `read`
 * when it has one (Redis's carries the store's clock, which the blocked-bucket cache needs to learn a
 * block from a read), else one peek per bucket at `now`.
 */
import type { BucketSpec, BucketState, ConsumeOutcome, Store } from './types.js';

/** `store.read(specs)`, or its peeks at `now()` (no store clock: a caller that maps times cannot learn from it). */
export function readThrough(store: Store, specs: readonly BucketSpec[], now: () => number): Promise<ConsumeOutcome> {
  if (store.read !== undefined) return store.read(specs);
  return Promise.all(specs.map((spec) => store.peek(spec))).then((buckets) => readOutcome(specs, buckets, now()));
}

/** A bucket's state and the store's clock when it was read (a Redis peek's reply). */
export interface TimedState {
  readonly state: BucketState;
  readonly now: number;
}

/** Peeks at the store's clock as one read's outcome, at the earliest of their clocks. */
export function timedReadOutcome(specs: readonly BucketSpec[], replies: readonly TimedState[]): ConsumeOutcome {
  let now = Infinity;
  for (const r of replies) now = Math.min(now, r.now);
  return readOutcome(
    specs,
    replies.map((r) => r.state),
    now,
  );
}

/** The bucket states of a read as its outcome: refused when a non-shadow bucket has no room. */
export function readOutcome(
  specs: readonly BucketSpec[],
  buckets: BucketState[],
  now: number,
  decider: 'store' | 'fallback' = 'store',
): ConsumeOutcome {
  let allowed = true;
  for (let i = 0; i < specs.length; i++) if (buckets[i]!.limited && !specs[i]!.shadow) allowed = false;
  return { allowed, decider, now, buckets };
}

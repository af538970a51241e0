/** @module A blocked bucket as the blocked-bucket cache (blocked.ts) holds it, and what it tells of its request's other buckets. */
import type { BucketSpec, BucketState } from './types.js';

/** One blocked bucket: until when, and what the request that blocked it saw. */
export interface Block {
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

/** Same rule, same cost: a bucket's cost is its rule's, so another one only follows a reload. */
export function sameShape(a: BucketSpec, b: BucketSpec): boolean {
  return a.cost === b.cost && a.limit === b.limit && a.periodMs === b.periodMs && a.algorithm === b.algorithm;
}

/** A bucket's state as seen beside the blocked one, unless it was itself limited and that has passed. */
export function lastSeen(e: Block, key: string, now: number): BucketState | undefined {
  for (let i = 0; i < e.specs.length; i++) {
    if (e.specs[i]!.key !== key) continue;
    const s = e.states[i]!;
    return s.limited && s.retryAt <= now ? undefined : s;
  }
  return undefined;
}

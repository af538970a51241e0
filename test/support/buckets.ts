/** @module Fresh bucket specs for store tests: each call a new key, so tests sharing a store do not interfere. */
import type { BucketSpec } from '../../src/limiter/types.js';

/** The plain spec of bucket `key` (fixed window, 3 a minute, cost 1, counted locally on store errors), with `over` replacing any of it. */
export function bucketSpec(key: string, over: Partial<BucketSpec> = {}): BucketSpec {
  return {
    key,
    limit: 3,
    periodMs: 60_000,
    algorithm: 'fixed-window',
    cost: 1,
    shadow: false,
    onError: 'local',
    ...over,
  };
}

/** A spec maker: `key(n)` names the n-th bucket; `defaults` (then each call's `over`) replace the plain fixed-window spec. */
export function freshBuckets(
  key: (n: number) => string,
  defaults: Partial<BucketSpec> = {},
): (over?: Partial<BucketSpec>) => BucketSpec {
  let seq = 0;
  return (over = {}) => bucketSpec(key(++seq), { ...defaults, ...over });
}

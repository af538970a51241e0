/** @module Fresh bucket specs for store tests: each call a new key, so tests sharing a store do not interfere. */
import type { BucketSpec } from '../../src/limiter/types.js';

/** A spec maker: `key(n)` names the n-th bucket; `defaults` (then each call's `over`) replace the plain fixed-window spec. */
export function freshBuckets(key: (n: number) => string, defaults: Partial<BucketSpec> = {}): (over?: Partial<BucketSpec>) => BucketSpec {
  let seq = 0;
  return (over = {}) => ({
    key: key(++seq),
    limit: 3,
    periodMs: 60_000,
    algorithm: 'fixed-window',
    cost: 1,
    shadow: false,
    onError: 'local',
    ...defaults,
    ...over,
  });
}

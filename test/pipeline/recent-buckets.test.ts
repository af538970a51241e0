/** @module RecentBuckets (pipeline/recent-buckets.ts): one bound on the buckets remembered for the whole table. */
import { describe, expect, it } from 'vitest';
import { RecentBuckets, type RecentBucket } from '../../src/pipeline/recent-buckets.js';
import type { CompiledRule } from '../../src/config/types.js';
import type { BucketSpec } from '../../src/limiter/types.js';

const rule = {} as CompiledRule;
const bucket = (tag: string): RecentBucket => ({ tag, rule, spec: { key: `r:{${tag}}` } as BucketSpec, kept: false });

describe('RecentBuckets', () => {
  it('answers each rule by tag, and empties every rule at once when the table’s bound is reached', () => {
    const r = new RecentBuckets(3, 4);
    const a = bucket('ip:a');
    r.keep(0, a);
    r.keep(1, bucket('ip:a'));
    r.keep(2, bucket('ip:b'));
    expect(r.get(0, 'ip:a')).toBe(a);
    expect(a.kept).toBe(true);
    expect(r.get(2, 'ip:a')).toBeUndefined();
    // The same bucket kept again, or another for a tag held: no more room taken.
    r.keep(0, a);
    const a2 = bucket('ip:a');
    r.keep(0, a2);
    expect(r.get(0, 'ip:a')).toBe(a2);
    r.keep(0, bucket('ip:c'));
    expect(r.get(0, 'ip:c')).toBeDefined();
    // The fifth distinct entry: every rule is emptied first, so the table never holds more than the bound.
    r.keep(1, bucket('ip:d'));
    expect([r.get(0, 'ip:a'), r.get(0, 'ip:c'), r.get(2, 'ip:b'), r.get(1, 'ip:a')]).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    expect(r.get(1, 'ip:d')).toBeDefined();
  });
});

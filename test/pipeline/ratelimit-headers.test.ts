import { describe, expect, it } from 'vitest';
import type { CompiledRule } from '../../src/config/types.js';
import { compileKey } from '../../src/keys/index.js';
import type { BucketState, ConsumeOutcome } from '../../src/limiter/types.js';
import {
  appendRateLimitHeaders,
  formatReset,
  headlineBucket,
  iso8601Micro,
} from '../../src/pipeline/ratelimit-headers.js';

const NOW = Date.UTC(2026, 10, 21, 19, 10, 0);

function rule(index: number, name: string, limit: number, over: Partial<CompiledRule> = {}): CompiledRule {
  return {
    index,
    name,
    key: compileKey('ip'),
    limit,
    periodMs: 300_000,
    algorithm: 'fixed-window',
    cost: 1,
    shadow: false,
    onStoreError: undefined,
    policyItem: `"${name}";q=${limit};w=300`,
    patterns: ['/api/*'],
    whenAuthenticated: undefined,
    whenAccount: null,
    surge: null,
    whenQuery: null,
    whenQueryPaths: null,
    needs: 0,
    overrides: [],
    overrideIndex: -1,
    ...over,
  };
}

function state(remaining: number, resetAt: number, over: Partial<BucketState> = {}): BucketState {
  return { remaining, resetAt, limited: false, retryAt: NOW, ...over };
}

function outcome(allowed: boolean, buckets: BucketState[]): ConsumeOutcome {
  return { allowed, now: NOW, buckets };
}

describe('the rate-limit headers', () => {
  it('show the bucket with the fewest remaining, and on a tie the rule listed first', () => {
    const rules = [rule(0, 'a', 10), rule(1, 'b', 6), rule(2, 'c', 100)];
    expect(headlineBucket(rules, outcome(true, [state(5, NOW + 1000), state(5, NOW + 2000), state(1, NOW)]))).toBe(2);
    expect(headlineBucket(rules, outcome(true, [state(5, NOW + 1000), state(5, NOW + 2000), state(50, NOW)]))).toBe(0);
    const out: string[] = [];
    appendRateLimitHeaders(
      out,
      rules,
      outcome(true, [state(5, NOW + 1000), state(5, NOW + 2000), state(50, NOW)]),
      'unix',
      false,
    );
    expect(out).toEqual([
      'X-RateLimit-Limit',
      '10',
      'X-RateLimit-Remaining',
      '5',
      'X-RateLimit-Reset',
      String(Math.ceil((NOW + 1000) / 1000)),
    ]);
  });

  it('on a 429 show the rejecting bucket that frees up last, with Retry-After rounded up', () => {
    const rules = [rule(0, 'a', 10), rule(1, 'b', 5), rule(2, 'c', 3)];
    const o = outcome(false, [
      state(4, NOW + 60_000),
      state(0, NOW + 90_000, { limited: true, retryAt: NOW + 89_001 }),
      state(0, NOW + 30_000, { limited: true, retryAt: NOW + 30_000 }),
    ]);
    const out: string[] = [];
    appendRateLimitHeaders(out, rules, o, 'iso8601', true);
    expect(out).toEqual([
      'X-RateLimit-Limit',
      '5',
      'X-RateLimit-Remaining',
      '0',
      'X-RateLimit-Reset',
      '2026-11-21T19:11:30.000000Z',
      'Retry-After',
      '90',
      'RateLimit-Policy',
      '"b";q=5;w=300, "c";q=3;w=300, "a";q=10;w=300',
      'RateLimit',
      '"b";r=0;t=90, "c";r=0;t=30, "a";r=4;t=60',
    ]);
  });

  it('never show a shadow rule to clients', () => {
    const rules = [rule(0, 'enforced', 100), rule(1, 'dry-run', 1, { shadow: true })];
    const out: string[] = [];
    appendRateLimitHeaders(
      out,
      rules,
      outcome(true, [state(99, NOW + 1000), state(0, NOW + 1000, { limited: true })]),
      'delta',
      true,
    );
    expect(out).toEqual([
      'X-RateLimit-Limit',
      '100',
      'X-RateLimit-Remaining',
      '99',
      'X-RateLimit-Reset',
      '1',
      'RateLimit-Policy',
      '"enforced";q=100;w=300',
      'RateLimit',
      '"enforced";r=99;t=1',
    ]);
    const none: string[] = [];
    appendRateLimitHeaders(none, [rules[1]!], outcome(true, [state(0, NOW)]), 'iso8601', true);
    expect(none).toEqual([]);
  });

  it('list the IETF fields closest to exhaustion first, right when the rule set or its order changes between requests', () => {
    const [a, b, c] = [rule(0, 'a', 10), rule(1, 'b', 20), rule(2, 'c', 30)];
    const ietf = (rules: CompiledRule[], buckets: BucketState[]) => {
      const out: string[] = [];
      appendRateLimitHeaders(out, rules, outcome(true, buckets), 'delta', true);
      return [out[7], out[9]];
    };
    // The value built for one request is reused only for the same rules in the same order.
    const ab = [state(5, NOW + 1000), state(9, NOW + 2000)];
    expect(ietf([a, b], ab)).toEqual(['"a";q=10;w=300, "b";q=20;w=300', '"a";r=5;t=1, "b";r=9;t=2']);
    expect(ietf([a, b], ab)).toEqual(['"a";q=10;w=300, "b";q=20;w=300', '"a";r=5;t=1, "b";r=9;t=2']);
    expect(ietf([a, b], [state(7, NOW + 1000), state(3, NOW + 2000)])).toEqual([
      '"b";q=20;w=300, "a";q=10;w=300',
      '"b";r=3;t=2, "a";r=7;t=1',
    ]);
    expect(ietf([a, c], [state(7, NOW + 1000), state(3, NOW + 3000)])).toEqual([
      '"c";q=30;w=300, "a";q=10;w=300',
      '"c";r=3;t=3, "a";r=7;t=1',
    ]);
    expect(ietf([a, b, c], [state(1, NOW), state(1, NOW), state(0, NOW)])).toEqual([
      '"c";q=30;w=300, "a";q=10;w=300, "b";q=20;w=300',
      '"c";r=0;t=0, "a";r=1;t=0, "b";r=1;t=0',
    ]);
    expect(ietf([a], [state(2, NOW)])).toEqual(['"a";q=10;w=300', '"a";r=2;t=0']);
    // The same names under another limit (a reload, an override's variant) are other rules.
    const a2 = rule(0, 'a', 99);
    expect(ietf([a2], [state(2, NOW)])[0]).toBe('"a";q=99;w=300');
  });

  it('format the reset as ISO 8601 with six fractional digits, Unix seconds, or seconds from now', () => {
    expect(iso8601Micro(Date.UTC(2017, 0, 1, 12, 0, 10))).toBe('2017-01-01T12:00:10.000000Z');
    expect(iso8601Micro(Date.UTC(2017, 0, 1, 12, 0, 10, 250))).toBe('2017-01-01T12:00:10.250000Z');
    expect(formatReset('unix', 1_700_000_000_001, 0)).toBe('1700000001');
    expect(formatReset('delta', NOW + 1_500, NOW)).toBe('2');
    expect(formatReset('delta', NOW - 10, NOW)).toBe('0');
  });
});

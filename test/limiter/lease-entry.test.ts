/** One key's lease: its size from the gateway's rate, and how long its tokens may be spent (pure logic). */
import { describe, expect, it } from 'vitest';
import { LeaseEntry, RecentKeys, windowStart } from '../../src/limiter/redis/lease-entry.js';
import type { BucketSpec } from '../../src/limiter/types.js';

const spec = (algorithm: BucketSpec['algorithm'], limit = 1_000, periodMs = 60_000, cost = 1): BucketSpec => ({
  key: 'k',
  limit,
  periodMs,
  algorithm,
  cost,
  shadow: false,
  onError: 'local',
});
const state = (remaining: number) => ({ remaining, resetAt: 0, limited: false, retryAt: 0 });

describe('a lease entry', () => {
  it('asks for nothing on a key seen once, then for its rate × target less what it holds', () => {
    const s = spec('fixed-window');
    const e = new LeaseEntry(s, 1_000);
    expect(e.want(1_000, 100, s)).toBe(0);
    e.called(1_000);
    // 9 requests admitted here and this one in 10 ms: 1 per ms → 100 for 100 ms.
    e.hits = 9;
    expect(e.want(1_010, 100, s)).toBe(100);
    e.pending = Promise.resolve();
    expect(e.want(1_010, 100, s)).toBe(0);
    e.pending = null;
    // A slow key (one request per second) gets no lease.
    e.called(2_000);
    expect(e.want(3_000, 100, s)).toBe(0);
  });

  it('counts a costlier bucket in tokens and never asks for more than the limit', () => {
    const s = spec('token-bucket', 50, 60_000, 3);
    const e = new LeaseEntry(s, 0);
    e.called(0);
    e.hits = 99;
    expect(e.want(10, 100, s)).toBe(50);
  });

  it("spends a window lease only until the window's end, mapped from when the call was sent", () => {
    const s = spec('fixed-window', 1_000, 1_000);
    const e = new LeaseEntry(s, 0);
    // Store time 10_900 (100 ms before its window ends), call sent at local 5_000.
    e.granted(20, state(500), 10_900, 5_000, 1_000);
    expect(e.tokens).toBe(20);
    expect(e.validUntil).toBe(5_100);
    expect(e.chargedAt).toBe(10_900);
    // A grant in the next window does not mix with tokens of the last.
    e.granted(5, state(400), 11_050, 5_150, 1_000);
    expect(e.tokens).toBe(5);
    expect(windowStart(s, e.chargedAt)).toBe(11_000);
  });

  it('spends a token-bucket lease for at most maxAge, and says when giving back still matters', () => {
    const tb = new LeaseEntry(spec('token-bucket'), 0);
    tb.granted(10, state(100), 50_000, 7_000, 1_000);
    expect(tb.validUntil).toBe(8_000);
    expect(tb.worthGivingBack(60_000)).toBe(true);
    const fw = new LeaseEntry(spec('fixed-window', 100, 1_000), 0);
    fw.granted(10, state(50), 10_500, 0, 1_000);
    expect(fw.worthGivingBack(10_999)).toBe(true);
    expect(fw.worthGivingBack(11_000)).toBe(false);
    const sw = new LeaseEntry(spec('sliding-window', 100, 1_000), 0);
    sw.granted(10, state(50), 10_500, 0, 1_000);
    expect(sw.worthGivingBack(11_500)).toBe(true);
    expect(sw.worthGivingBack(12_000)).toBe(false);
  });
});

describe('the recent-keys table', () => {
  it('says a key is back only within the window, and forgets it when the window has passed', () => {
    const recent = new RecentKeys();
    expect(recent.seen('rl:{ip:1}', 1_000, 500)).toBe(-1);
    expect(recent.seen('rl:{ip:1}', 1_200, 500)).toBe(1_000);
    expect(recent.seen('rl:{ip:1}', 1_800, 500)).toBe(-1);
    expect(recent.seen('rl:{ip:2}', 1_800, 500)).toBe(-1);
  });
});

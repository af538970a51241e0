import { describe, expect, it } from 'vitest';
import { MAX_NETWORKS, NetworkShares } from '../../src/surge/network-shares.js';

const MIN = 60_000;

describe('a surge trigger’s share per network', () => {
  it('lets one network add at most perNetwork within the window, and again as the window slides', () => {
    const shares = new NetworkShares(3, 10 * MIN);
    const t0 = 100 * 10 * MIN; // the start of a window
    expect([1, 2, 3, 4].map(() => shares.take('203.0.113.0/24', t0))).toEqual([true, true, true, false]);
    // Another network has a share of its own.
    expect(shares.take('198.51.100.0/24', t0)).toBe(true);
    // Within the next window the previous count weighs by its unelapsed share: 3 × (1 − 1/3) = 2, room for 1.
    const later = t0 + 10 * MIN + Math.ceil((10 * MIN) / 3);
    expect([shares.take('203.0.113.0/24', later), shares.take('203.0.113.0/24', later)]).toEqual([true, false]);
    // Two windows on, the share is whole again.
    expect([1, 2, 3, 4].map(() => shares.take('203.0.113.0/24', t0 + 30 * MIN))).toEqual([true, true, true, false]);
  });

  it('remembers a bounded number of networks, forgetting the one seen longest ago', () => {
    const shares = new NetworkShares(1, MIN, 3);
    for (const n of ['a', 'b', 'c']) expect(shares.take(n, 0)).toBe(true);
    expect(shares.take('a', 0)).toBe(false);
    expect(shares.take('d', 0)).toBe(true);
    expect(shares.size).toBe(3);
    // `a` was forgotten for `d` (10 000 networks by default): it has a fresh share.
    expect(shares.take('a', 0)).toBe(true);
    expect(MAX_NETWORKS).toBe(10_000);
  });

  it('is whole again for every network once cleared (the count started again)', () => {
    const shares = new NetworkShares(1, MIN);
    expect([shares.take('a', 0), shares.take('a', 0)]).toEqual([true, false]);
    shares.clear();
    expect(shares.take('a', 0)).toBe(true);
  });
});

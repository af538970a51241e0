/**
 * The lease layer's synchronous answer (consumeLocal) and its sweep timer, over a scripted store that
 * grants leases as lua/lib.lua does (all or nothing, then at most what remains ÷ share): pure logic, so
 * no Redis. The bounds on real Redis with several gateways are in lease.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { createLeaseStore } from '../../src/limiter/redis/lease.js';
import type { BucketSpec, BucketState, ConsumeOutcome, Store } from '../../src/limiter/types.js';
import { FakeClock } from '../support/clock.js';
import { freshBuckets } from '../support/buckets.js';

const T0 = Date.UTC(2026, 10, 21, 19, 0, 0);
const spec = freshBuckets((n) => `l${n}:{ip:192.0.2.1}`, { limit: 1_000, periodMs: 3_600_000 });

/** A fixed-window store that grants the lease asked for as far as it fits, counting its calls. */
class Granting implements Store {
  calls = 0;
  readonly given = new Map<string, number>();
  private readonly used = new Map<string, number>();
  constructor(private readonly clock: FakeClock) {}
  consume(specs: readonly BucketSpec[]): Promise<ConsumeOutcome> {
    this.calls++;
    const now = this.clock.now();
    const allowed = specs.every((s) => s.shadow || (this.used.get(s.key) ?? 0) + s.cost <= s.limit);
    const buckets = specs.map((s): BucketState => {
      const used = this.used.get(s.key) ?? 0;
      if (!allowed)
        return {
          remaining: s.limit - used,
          resetAt: T0 + s.periodMs,
          limited: used + s.cost > s.limit,
          retryAt: T0 + s.periodMs,
        };
      const left = s.limit - used - s.cost;
      const leased = Math.min(s.lease ?? 0, Math.floor(left / (s.leaseShare ?? 1)));
      this.used.set(s.key, used + s.cost + leased);
      return { remaining: left - leased, resetAt: T0 + s.periodMs, limited: false, retryAt: now, leased };
    });
    return Promise.resolve({ allowed, now, buckets });
  }
  peek(): Promise<BucketState> {
    throw new Error('not used');
  }
  reset(): Promise<void> {
    return Promise.resolve();
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
  /** Tokens charged so far for a key: requests admitted by the store plus every lease. */
  charged(key: string): number {
    return this.used.get(key) ?? 0;
  }
}

function setup() {
  const clock = new FakeClock(T0);
  const inner = new Granting(clock);
  const gaveBack: number[] = [];
  const leases = createLeaseStore(inner, {
    clock,
    gateways: 1,
    giveBack: (_s, tokens) => {
      gaveBack.push(tokens);
      return Promise.resolve();
    },
  });
  return { clock, inner, leases, gaveBack };
}

describe('the lease layer, answering synchronously', () => {
  it('admits from a held lease without asking the store, exactly as many requests as it holds tokens, then answers nothing', async () => {
    const { inner, leases } = setup();
    const b = spec();
    // A key seen twice within the lease target gets a lease with its second store call.
    await leases.consume([b]);
    await leases.consume([b]);
    const held = leases.heldTokens(b.key);
    expect(held).toBeGreaterThan(0);
    const calls = inner.calls;
    let local = 0;
    for (let out = leases.consumeLocal([b]); out !== undefined; out = leases.consumeLocal([b])) {
      expect(out.allowed).toBe(true);
      local++;
      // Remaining as the store would say it: what it has left plus what is still held here.
      expect(out.buckets[0]!.remaining).toBe(b.limit - inner.charged(b.key) + leases.heldTokens(b.key));
    }
    expect(local).toBe(held);
    expect(inner.calls).toBe(calls);
    expect(leases.heldTokens(b.key)).toBe(0);
    expect(leases.localAdmissions).toBe(held);
    // Never more admitted than the store charged: every admission was counted there first.
    expect(2 + local).toBeLessThanOrEqual(inner.charged(b.key));
  });

  it('answers nothing, and spends nothing, when a bucket holds no lease, the lease has expired, or the rule changed', async () => {
    const { clock, inner, leases } = setup();
    const b = spec();
    await leases.consume([b]);
    await leases.consume([b]);
    const held = leases.heldTokens(b.key);
    expect(held).toBeGreaterThan(1);
    expect(leases.consumeLocal([b, spec()])).toBeUndefined();
    expect(leases.consumeLocal([{ ...b, limit: 999 }])).toBeUndefined();
    expect(leases.consumeLocal([{ ...b, cost: held + 1 }])).toBeUndefined();
    expect(leases.heldTokens(b.key)).toBe(held);
    expect(leases.consumeLocal([b])?.allowed).toBe(true);
    clock.set(T0 + 1_000); // maxAgeMs: the lease may no longer be spent
    expect(leases.consumeLocal([b])).toBeUndefined();
    expect(inner.calls).toBe(2);
    expect(leases.localAdmissions).toBe(1);
  });

  it('keeps a sweep timer only while some key has lease state', async () => {
    const { clock, leases, gaveBack } = setup();
    expect(clock.pendingTimers).toBe(0);
    const b = spec();
    await leases.consume([b]);
    expect(clock.pendingTimers).toBe(0); // a key seen once has no lease state
    await leases.consume([b]);
    expect(leases.heldTokens()).toBeGreaterThan(0);
    expect(clock.pendingTimers).toBe(1);
    const held = leases.heldTokens();
    clock.advance(2_000); // idle past idleMs: the tokens go back, the key's state goes
    expect(gaveBack).toEqual([held]);
    expect(leases.heldTokens()).toBe(0);
    expect(clock.pendingTimers).toBe(0);
    await leases.consume([b]);
    await leases.consume([b]);
    expect(clock.pendingTimers).toBe(1);
    await leases.close();
    expect(clock.pendingTimers).toBe(0);
  });
});

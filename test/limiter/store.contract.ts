/**
 * The store contract: every Store (memory, Redis, Redis Cluster) must pass this same suite, so that their
 * decisions and header values cannot drift. Times are scripted with a fake clock that each store is
 * built around; expected values are worked out by hand in the comments.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { BucketSpec, Store } from '../../src/limiter/types.js';
import { bucketKey, ruleKeyPrefix } from '../../src/limiter/keys.js';
import { FakeClock } from '../support/clock.js';
import { freshBuckets } from '../support/buckets.js';
import { createStoreFor } from '../../src/limiter/factory.js';

export type StoreFactory = (clock: FakeClock) => Promise<Store>;

/** A time on a 5-minute (and 30-minute and 1-hour) boundary, so window edges are easy to reason about. */
const T0 = Date.UTC(2026, 10, 21, 19, 0, 0);
// Each test gets fresh keys so that stores shared across tests do not interfere.
const bucket = freshBuckets((n) => `contract-${process.pid}-${n}:{ip:192.0.2.1}`);
/** For the keys and rule names made by hand below (their own prefix: never one of bucket()'s). */
let seq = 0;

/**
 * The store with every decision asked of `consumeLocal` first, as the request path asks it, and of
 * `consume` when it gives no answer; a call that gives none must have changed no bucket (checked by
 * peeking before and after). Run through the contract, its answers must be the store's own.
 */
export function throughConsumeLocal(store: Store): Store {
  const local = store.consumeLocal!.bind(store);
  return {
    async consume(specs) {
      const before = await Promise.all(specs.map((s) => store.peek(s)));
      const out = local(specs);
      if (out !== undefined) return out;
      expect(await Promise.all(specs.map((s) => store.peek(s)))).toEqual(before);
      return store.consume(specs);
    },
    ...(store.refund ? { refund: store.refund.bind(store) } : {}),
    peek: (spec) => store.peek(spec),
    reset: (spec) => store.reset(spec),
    close: () => store.close(),
  };
}

/**
 * The contract for the stack production builds on the store at `url()` (the blocked-bucket cache over
 * the fault policy over the store, leases inside), asked as a store is, and synchronously first as the
 * request path asks it.
 */
export function composedStoreContracts(name: string, url: () => string): void {
  const compose = async (prefix: string, clock: FakeClock): Promise<Store> =>
    (await createStoreFor({ url: url(), prefix, timeout: 2_000, onError: 'deny' }, { now: clock.now })).store;
  storeContract(`${name} as the factory composes it (BlockedCache over Resilient)`, (clock) =>
    compose('rgdeco', clock),
  );
  storeContract(`${name} as the factory composes it, decided through consumeLocal`, async (clock) =>
    throughConsumeLocal(await compose('rglocal', clock)),
  );
  // A lone gateway (the fleet's count once the store answered) shares a bucket with no one: its leases
  // may take up to half of what remains, the largest they get.
  const lone = async (prefix: string, clock: FakeClock): Promise<Store> =>
    (await createStoreFor({ url: url(), prefix, timeout: 2_000, onError: 'deny', gateways: 1 }, { now: clock.now }))
      .store;
  storeContract(`${name} as the factory composes it for a lone gateway, decided through consumeLocal`, async (clock) =>
    throughConsumeLocal(await lone('rglone', clock)),
  );
  const unleased = async (prefix: string, clock: FakeClock): Promise<Store> =>
    (await createStoreFor({ url: url(), prefix, timeout: 2_000, onError: 'deny', lease: false }, { now: clock.now }))
      .store;
  storeContract(`${name} as the factory composes it with store.lease: false`, (clock) => unleased('rgnolease', clock));
}

export function storeContract(name: string, factory: StoreFactory): void {
  describe(`the ${name} store contract`, () => {
    let clock: FakeClock;
    let store: Store;

    beforeEach(async () => {
      clock = new FakeClock(T0);
      store = await factory(clock);
    });
    afterEach(async () => {
      await store.close();
    });

    it('admits exactly limit requests in a fixed window, counting down to 0, then rejects until the window ends', async () => {
      const b = bucket();
      clock.advance(10_000);
      const seen = [];
      for (let i = 0; i < 4; i++) seen.push(await store.consume([b]));
      expect(seen.map((o) => o.allowed)).toEqual([true, true, true, false]);
      expect(seen.map((o) => o.buckets[0]!.remaining)).toEqual([2, 1, 0, 0]);
      // The window is epoch-aligned: it ends at T0 + 60 s whatever time the first request came.
      expect(seen.map((o) => o.buckets[0]!.resetAt)).toEqual([T0 + 60_000, T0 + 60_000, T0 + 60_000, T0 + 60_000]);
      expect(seen[3]!.buckets[0]).toMatchObject({ limited: true, retryAt: T0 + 60_000 });
      expect(seen[3]!.now).toBe(T0 + 10_000);

      clock.set(T0 + 59_999);
      expect((await store.consume([b])).allowed).toBe(false);
      clock.set(T0 + 60_000);
      const next = await store.consume([b]);
      expect(next.allowed).toBe(true);
      expect(next.buckets[0]).toMatchObject({ remaining: 2, resetAt: T0 + 120_000, limited: false });
    });

    it('charges every bucket or none: a rejected request leaves the other buckets untouched', async () => {
      const wide = bucket({ limit: 5 });
      const narrow = bucket({ limit: 1 });
      const first = await store.consume([wide, narrow]);
      expect(first.allowed).toBe(true);
      expect(first.buckets.map((b) => b.remaining)).toEqual([4, 0]);

      for (let i = 0; i < 3; i++) {
        const rejected = await store.consume([wide, narrow]);
        expect(rejected.allowed).toBe(false);
        // The wide bucket reports what it has, uncharged; the narrow one is the rejecting bucket.
        expect(rejected.buckets[0]).toMatchObject({ remaining: 4, limited: false });
        expect(rejected.buckets[1]).toMatchObject({ remaining: 0, limited: true, retryAt: T0 + 60_000 });
      }
      expect((await store.peek(wide)).remaining).toBe(4);
      expect((await store.consume([wide])).buckets[0]!.remaining).toBe(3);
    });

    it('charges every bucket or none when the buckets belong to different identities (different cluster slots)', async () => {
      // An IP bucket and an account bucket carry different hash tags: on a cluster they live in different
      // slots, so this is the reserve-and-refund path there. The result must not differ from one slot.
      const acct = (over: Partial<BucketSpec> = {}): BucketSpec =>
        bucket({ key: `contract-${process.pid}-h${++seq}:{acct:1}`, ...over });
      const ipWide = bucket({ limit: 5 });
      const acctNarrow = acct({ limit: 1 });
      expect((await store.consume([ipWide, acctNarrow])).buckets.map((b) => b.remaining)).toEqual([4, 0]);
      for (let i = 0; i < 3; i++) {
        const rejected = await store.consume([ipWide, acctNarrow]);
        expect(rejected.allowed).toBe(false);
        expect(rejected.buckets[0]).toMatchObject({ remaining: 4, limited: false });
        expect(rejected.buckets[1]).toMatchObject({ remaining: 0, limited: true, retryAt: T0 + 60_000 });
      }
      expect((await store.peek(ipWide)).remaining).toBe(4);

      // The other way round: the account side has room, the IP side rejects; the account stays uncharged.
      const ipNarrow = bucket({ limit: 1 });
      const acctWide = acct({ limit: 5 });
      await store.consume([ipNarrow]);
      for (let i = 0; i < 3; i++)
        expect((await store.consume([acctWide, ipNarrow])).buckets[0]).toMatchObject({ remaining: 5, limited: false });
      expect((await store.peek(acctWide)).remaining).toBe(5);

      // Every algorithm gives the charge back exactly: one more request fits afterwards, and no more.
      for (const algorithm of ['fixed-window', 'sliding-window', 'token-bucket'] as const) {
        const a = bucket({ algorithm, limit: 2, periodMs: 1_000 });
        const b = acct({ algorithm, limit: 1, periodMs: 1_000 });
        expect((await store.consume([a, b])).allowed).toBe(true);
        expect((await store.consume([a, b])).allowed).toBe(false);
        expect((await store.consume([b, a])).allowed).toBe(false);
        expect(await store.peek(a)).toMatchObject({ remaining: 1, limited: false });
        const last = await store.consume([a]);
        expect(last.buckets[0]).toMatchObject({ remaining: 0, limited: false });
        expect((await store.consume([a])).allowed).toBe(false);
      }
    });

    it('counts token, header and parameter keys and override buckets like any other, all-or-nothing, in every algorithm', async () => {
      const digest = (c: string) => c.repeat(64);
      for (const algorithm of ['fixed-window', 'sliding-window', 'token-bucket'] as const) {
        const rule = `contract-${process.pid}-h${++seq}`;
        const tags: Record<string, string> = {
          ip: 'ip:192.0.2.1',
          token: `tok:${digest('t')}`,
          header: `hdr:${digest('h')}`,
          param: `prm:${digest('p')}`,
          account: 'acct:a:1',
        };
        const key = (per: string, override = -1) => bucketKey(ruleKeyPrefix(rule, override), tags[per]!);
        const spec = (k: string, limit: number): BucketSpec => bucket({ key: k, algorithm, limit, periodMs: 60_000 });
        // One request in five identities' buckets (five cluster slots): the parameter bucket is the narrowest.
        const all = [
          spec(key('ip'), 5),
          spec(key('token'), 5),
          spec(key('header'), 5),
          spec(key('param'), 1),
          spec(key('account'), 5),
        ];
        expect((await store.consume(all)).allowed).toBe(true);
        const refused = await store.consume(all);
        expect(refused.allowed).toBe(false);
        expect(refused.buckets.map((b) => b.limited)).toEqual([false, false, false, true, false]);
        // Nothing was charged by the refused request.
        for (const i of [0, 1, 2, 4]) expect((await store.peek(all[i]!)).remaining).toBe(4);
        // An override's bucket for the same client is its own: the default one's exhaustion is not its.
        const overridden = spec(key('param', 0), 3);
        expect(overridden.key).not.toBe(all[3]!.key);
        const o = await store.consume([overridden]);
        expect(o.allowed).toBe(true);
        expect(o.buckets[0]!.remaining).toBe(2);
        expect((await store.peek(all[3]!)).remaining).toBe(0);
      }
    });

    it('takes cost tokens per request and rejects a request whose cost no longer fits', async () => {
      const b = bucket({ limit: 5, cost: 2 });
      const r = [await store.consume([b]), await store.consume([b]), await store.consume([b])];
      expect(r.map((o) => o.allowed)).toEqual([true, true, false]);
      expect(r.map((o) => o.buckets[0]!.remaining)).toEqual([3, 1, 0]);
      // One unit is still there for a cost-1 request on the same key.
      expect((await store.consume([{ ...b, cost: 1 }])).allowed).toBe(true);
    });

    it('admits requests of cost 3 against a limit of 10 three times, then refuses (a lease never holds part of a request)', async () => {
      for (const algorithm of ['fixed-window', 'sliding-window', 'token-bucket'] as const) {
        const b = bucket({ algorithm, limit: 10, cost: 3, periodMs: 3_600_000 });
        const r = [];
        for (let i = 0; i < 5; i++) r.push(await store.consume([b]));
        expect(
          r.map((o) => o.allowed),
          algorithm,
        ).toEqual([true, true, true, false, false]);
        expect(
          r.map((o) => o.buckets[0]!.remaining),
          algorithm,
        ).toEqual([7, 4, 1, 0, 0]);
        // The one unit left still admits a request of cost 1 on the same key.
        const one = await store.consume([{ ...b, cost: 1 }]);
        expect(one.allowed, algorithm).toBe(true);
        expect(one.buckets[0]!.remaining, algorithm).toBe(0);
      }
    });

    it('admits a request whose cost is the limit once, and never one whose cost is above it', async () => {
      const whole = bucket({ limit: 10, cost: 10 });
      const w = [await store.consume([whole]), await store.consume([whole]), await store.consume([whole])];
      expect(w.map((o) => o.allowed)).toEqual([true, false, false]);
      expect(w[0]!.buckets[0]).toMatchObject({ remaining: 0, limited: false });
      expect(w[1]!.buckets[0]).toMatchObject({ remaining: 0, limited: true, retryAt: T0 + 60_000 });
      const over = bucket({ limit: 10, cost: 11 });
      for (let i = 0; i < 3; i++) expect((await store.consume([over])).allowed).toBe(false);
      // Refusals charge nothing: the bucket is full, and a request of cost 1 leaves 9.
      expect(await store.peek({ ...over, cost: 1 })).toMatchObject({ remaining: 10, limited: false });
      expect((await store.consume([{ ...over, cost: 1 }])).buckets[0]!.remaining).toBe(9);
    });

    it('counts mixed costs on one key exactly', async () => {
      const b = bucket({ limit: 10, periodMs: 3_600_000 });
      const costs = [3, 3, 1, 2, 3, 1, 1];
      const r = [];
      for (const cost of costs) r.push(await store.consume([{ ...b, cost }]));
      // 7, 4, 3, 1; cost 3 does not fit in 1; then 0; then nothing.
      expect(r.map((o) => o.allowed)).toEqual([true, true, true, true, false, true, false]);
      expect(r.map((o) => o.buckets[0]!.remaining)).toEqual([7, 4, 3, 1, 0, 0, 0]);
    });

    it('charges several buckets of cost 3 all-or-nothing until the narrowest is spent', async () => {
      const narrow = bucket({ limit: 10, cost: 3, periodMs: 3_600_000 });
      const wide = bucket({ limit: 20, cost: 3, periodMs: 3_600_000 });
      const r = [];
      for (let i = 0; i < 5; i++) r.push(await store.consume([wide, narrow]));
      expect(r.map((o) => o.allowed)).toEqual([true, true, true, false, false]);
      expect(r.map((o) => o.buckets.map((s) => s.remaining))).toEqual([
        [17, 7],
        [14, 4],
        [11, 1],
        [11, 0],
        [11, 0],
      ]);
      // The wide bucket alone goes on: 11 left, three more requests of cost 3.
      const alone = [];
      for (let i = 0; i < 4; i++) alone.push((await store.consume([wide])).allowed);
      expect(alone).toEqual([true, true, true, false]);
    });

    it('gives back what a request refused after its decision was charged, in every bucket and every algorithm, and nothing for a refused one', async () => {
      expect(store.refund).toBeTypeOf('function');
      const acct = (over: Partial<BucketSpec> = {}): BucketSpec =>
        bucket({ key: `contract-${process.pid}-h${++seq}:{acct:1}`, ...over });
      for (const algorithm of ['fixed-window', 'sliding-window', 'token-bucket'] as const) {
        const ip = bucket({ algorithm, limit: 10, cost: 3, periodMs: 3_600_000 });
        // Another identity: another Cluster slot, refunded in its own.
        const account = acct({ algorithm, limit: 20, cost: 3, periodMs: 3_600_000 });
        for (let i = 0; i < 6; i++) {
          const out = await store.consume([ip, account]);
          expect(out.allowed, `${algorithm} request ${i}`).toBe(true);
          await store.refund!([ip, account], out);
        }
        // A refused request charged nothing, so refunding its outcome gives nothing.
        const refused = bucket({ algorithm, limit: 1, cost: 3, periodMs: 3_600_000 });
        const no = await store.consume([refused, ip]);
        expect(no.allowed).toBe(false);
        await store.refund!([refused, ip], no);
        // Six refunded requests cost nothing: the limit is whole (a token bucket keeps at most the
        // refill a lease's age or the clocks' skew would give back twice, never more than one request).
        const after = [];
        for (let i = 0; i < 4; i++) after.push(await store.consume([ip, account]));
        expect(
          after.map((o) => o.allowed),
          algorithm,
        ).toEqual([true, true, true, false]);
        if (algorithm !== 'token-bucket')
          expect(
            after.map((o) => o.buckets[0]!.remaining),
            algorithm,
          ).toEqual([7, 4, 1, 0]);
      }
    });

    it('never rejects for a shadow bucket but reports it limited, and does not push it past its limit', async () => {
      const enforced = bucket({ limit: 10 });
      const shadow = bucket({ limit: 1, shadow: true });
      const a = await store.consume([enforced, shadow]);
      const b = await store.consume([enforced, shadow]);
      expect([a.allowed, b.allowed]).toEqual([true, true]);
      expect(a.buckets[1]).toMatchObject({ remaining: 0, limited: false });
      expect(b.buckets[1]).toMatchObject({ remaining: 0, limited: true });
      expect(b.buckets[0]!.remaining).toBe(8);
      // A shadow bucket alone never rejects either.
      expect((await store.consume([shadow])).allowed).toBe(true);
    });

    it('weights the previous window by the unelapsed fraction of the current one in a sliding window', async () => {
      const b = bucket({ algorithm: 'sliding-window', limit: 10, periodMs: 60_000 });
      clock.set(T0 + 30_000);
      for (let i = 0; i < 10; i++) expect((await store.consume([b])).allowed).toBe(true);
      const full = await store.consume([b]);
      expect(full.allowed).toBe(false);
      // Fully replenished when this window's 10 stop weighing: the end of the next window.
      expect(full.buckets[0]).toMatchObject({ remaining: 0, limited: true, resetAt: T0 + 120_000 });
      // Next window: prev = 10, cur = 0. At 15 s in (45 s unelapsed) the estimate is 10 × 45/60 = 7.5.
      // A request fits while cur + 1 + 7.5 ≤ 10: two pass (estimate 8.5, then 9.5), the third does not.
      expect(full.buckets[0]!.retryAt).toBe(T0 + 60_000 + 6_000); // 10·(60 − e)/60 ≤ 9 ⇔ e ≥ 6 s
      clock.set(T0 + 75_000);
      const r = [await store.consume([b]), await store.consume([b]), await store.consume([b])];
      expect(r.map((o) => o.allowed)).toEqual([true, true, false]);
      expect(r.map((o) => o.buckets[0]!.remaining)).toEqual([1, 0, 0]);
      // cur = 2, prev = 10, room = (10 − 2 − 1)·60000 = 420000 → e ≥ 60000 − 420000/10 = 18 s.
      expect(r[2]!.buckets[0]!.retryAt).toBe(T0 + 60_000 + 18_000);
      clock.set(T0 + 78_000);
      expect((await store.consume([b])).allowed).toBe(true);
      // Two windows later nothing weighs any more.
      clock.set(T0 + 180_000);
      const fresh = await store.consume([b]);
      expect(fresh.buckets[0]).toMatchObject({ remaining: 9, limited: false });
    });

    it('refills a token bucket continuously at limit per period', async () => {
      const b = bucket({ algorithm: 'token-bucket', limit: 10, periodMs: 10_000 });
      clock.set(T0 + 123);
      const burst = [];
      for (let i = 0; i < 11; i++) burst.push(await store.consume([b]));
      expect(burst.map((o) => o.allowed)).toEqual([...Array(10).fill(true), false]);
      expect(burst.map((o) => o.buckets[0]!.remaining)).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0]);
      // Empty now; one token every second. Full again 10 s after the burst.
      expect(burst[10]!.buckets[0]).toMatchObject({
        limited: true,
        retryAt: T0 + 123 + 1_000,
        resetAt: T0 + 123 + 10_000,
      });
      clock.advance(999);
      expect((await store.consume([b])).allowed).toBe(false);
      clock.advance(1);
      const one = await store.consume([b]);
      expect(one.allowed).toBe(true);
      expect(one.buckets[0]!.remaining).toBe(0);
      clock.advance(5_000);
      expect((await store.consume([b])).buckets[0]!.remaining).toBe(4);
    });

    it('reads a bucket without charging it and resets it to full', async () => {
      const b = bucket({ limit: 2 });
      expect(await store.peek(b)).toMatchObject({ remaining: 2, limited: false });
      await store.consume([b]);
      await store.consume([b]);
      expect(await store.peek(b)).toMatchObject({ remaining: 0, limited: true, retryAt: T0 + 60_000 });
      expect(await store.peek(b)).toMatchObject({ remaining: 0 });
      await store.reset(b);
      expect(await store.peek(b)).toMatchObject({ remaining: 2, limited: false });
      expect((await store.consume([b])).allowed).toBe(true);
    });

    it('reads several buckets at once as a peek reads each, at their cost, charging none (read, and readLocal where it answers)', async () => {
      const full = bucket({ limit: 10, cost: 3 });
      const room = bucket({ limit: 10, cost: 3, algorithm: 'sliding-window' });
      const shadow = bucket({ limit: 3, cost: 3, algorithm: 'token-bucket', shadow: true });
      for (let i = 0; i < 3; i++) expect((await store.consume([full])).allowed).toBe(true);
      await store.consume([room]);
      await store.consume([shadow]);
      const specs = [room, full, shadow];
      const peeks = await Promise.all(specs.map((s) => store.peek(s)));
      expect(peeks.map((p) => p.limited)).toEqual([false, true, true]);
      const asPeeked = (out: { allowed: boolean; buckets: readonly { limited: boolean; retryAt: number }[] }) => {
        // A shadow bucket never vetoes: the full one does.
        expect(out.allowed).toBe(false);
        expect(out.buckets.map((b) => b.limited)).toEqual([false, true, true]);
        // (A limited bucket's remaining is shown as 0 whatever a read reports.)
        expect(out.buckets[1]).toMatchObject({ retryAt: peeks[1]!.retryAt, resetAt: peeks[1]!.resetAt });
        expect(out.buckets[0]).toMatchObject({ remaining: peeks[0]!.remaining, resetAt: peeks[0]!.resetAt });
      };
      if (store.read) {
        const read = await store.read(specs);
        asPeeked(read);
        // At the store's clock: a blocked-bucket cache in front maps a block's times by it.
        expect(read.now).toBe(clock.now());
        expect((await store.read([room])).allowed).toBe(true);
      }
      const local = store.readLocal?.(specs);
      if (local !== undefined) asPeeked(local);
      // Nothing was charged by any read.
      expect(await Promise.all(specs.map((s) => store.peek(s)))).toEqual(peeks);
      expect((await store.consume([room])).buckets[0]!.remaining).toBe(4);
    });

    it('starts a bucket full again once its period has long passed', async () => {
      for (const algorithm of ['fixed-window', 'sliding-window', 'token-bucket'] as const) {
        const b = bucket({ algorithm, limit: 2, periodMs: 1_000 });
        await store.consume([b]);
        await store.consume([b]);
        expect((await store.consume([b])).allowed).toBe(false);
        clock.advance(2_001);
        const again = await store.consume([b]);
        expect(again.allowed).toBe(true);
        expect(again.buckets[0]!.remaining).toBe(1);
      }
    });
  });
}

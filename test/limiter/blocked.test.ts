import { describe, expect, it } from 'vitest';
import { createBlockedCacheStore } from '../../src/limiter/blocked.js';
import { MemoryStore } from '../../src/limiter/memory/store.js';
import type { BucketSpec, BucketState, ConsumeOutcome, Store } from '../../src/limiter/types.js';
import { FakeClock } from '../support/clock.js';
import { freshBuckets } from '../support/buckets.js';

const T0 = Date.UTC(2026, 10, 21, 19, 0, 0);
const spec = freshBuckets((n) => `b${n}:{ip:192.0.2.1}`);

/** The inner store, counting the calls that reach it (the Redis round trips the cache saves). */
class Counting implements Store {
  consumes = 0;
  peeks = 0;
  resets = 0;
  constructor(readonly inner: Store) {}
  consume(specs: readonly BucketSpec[]): Promise<ConsumeOutcome> {
    this.consumes++;
    return this.inner.consume(specs);
  }
  peek(s: BucketSpec): Promise<BucketState> {
    this.peeks++;
    return this.inner.peek(s);
  }
  reset(s: BucketSpec): Promise<void> {
    this.resets++;
    return this.inner.reset(s);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

/** An inner store that decides without I/O (as a held lease does), counting both kinds of call. */
class CountingLocal extends Counting {
  locals = 0;
  constructor(readonly memory: MemoryStore) {
    super(memory);
  }
  consumeLocal(specs: readonly BucketSpec[]): ConsumeOutcome {
    this.locals++;
    return this.memory.consumeLocal(specs);
  }
}

function setup(maxEntries?: number) {
  const clock = new FakeClock(T0);
  const inner = new Counting(new MemoryStore({ now: clock.now, sweepIntervalMs: 0 }));
  const store = createBlockedCacheStore(inner, { now: clock.now, ...(maxEntries ? { maxEntries } : {}) });
  return { clock, inner, store };
}

describe('the blocked-bucket cache', () => {
  it('answers a flood from one client locally once the store has shown its bucket limited, until retryAt', async () => {
    const { clock, inner, store } = setup();
    const b = spec();
    for (let i = 0; i < 4; i++) await store.consume([b]);
    expect(inner.consumes).toBe(4);
    for (let i = 0; i < 1_000; i++) {
      const out = await store.consume([b]);
      expect(out.allowed).toBe(false);
    }
    expect(inner.consumes).toBe(4);
    expect(store.localRejections).toBe(1_000);
    clock.set(T0 + 59_999);
    expect(await store.consume([b])).toEqual({
      allowed: false,
      decider: 'cache',
      now: T0 + 59_999,
      // Headers stay right: the window's end as reset and retry time, nothing remaining.
      buckets: [{ remaining: 0, resetAt: T0 + 60_000, limited: true, retryAt: T0 + 60_000 }],
    });
    expect(inner.consumes).toBe(4);
    clock.set(T0 + 60_000);
    const again = await store.consume([b]);
    expect(again.allowed).toBe(true);
    expect(inner.consumes).toBe(5);
    expect(store.size).toBe(0);
  });

  it('makes exactly the decisions of the store without it, for every algorithm and random traffic', async () => {
    const clock = new FakeClock(T0 + 17);
    const plain = new MemoryStore({ now: clock.now, sweepIntervalMs: 0 });
    const inner = new Counting(new MemoryStore({ now: clock.now, sweepIntervalMs: 0 }));
    const cached = createBlockedCacheStore(inner, { now: clock.now });
    let seed = 7;
    const rand = (n: number): number => {
      seed = (seed * 16807) % 2147483647;
      return seed % n;
    };
    // As in the gateway: a bucket's cost is its rule's (never above its limit: the config refuses that),
    // and one request never names a bucket twice.
    const pool = (['fixed-window', 'sliding-window', 'token-bucket'] as const).flatMap((algorithm) =>
      [1, 2, 5].flatMap((limit) =>
        [1, 2]
          .filter((cost) => cost <= limit)
          .map((cost) => spec({ algorithm, limit, cost, periodMs: [1_000, 3_000, 7_001][rand(3)]! })),
      ),
    );
    let local = 0;
    for (let step = 0; step < 3_000; step++) {
      clock.advance(rand(5) === 0 ? rand(700) : 0);
      const first = pool[rand(pool.length)]!;
      const second = pool[rand(pool.length)]!;
      const picked = rand(2) && second !== first ? [first, second] : [first];
      const before = inner.consumes;
      const want = await plain.consume(picked);
      const got = await cached.consume(picked);
      expect(got.allowed).toBe(want.allowed);
      // The bucket that blocked reports what the store would have reported.
      for (let i = 0; i < picked.length; i++)
        if (got.buckets[i]!.limited && !picked[i]!.shadow) expect(got.buckets[i]).toEqual(want.buckets[i]);
      if (inner.consumes === before) local++;
    }
    expect(local).toBeGreaterThan(300);
  });

  it("reports a locally rejected request's other buckets as last seen beside the blocked one, and an unseen one as full", async () => {
    const { inner, store } = setup();
    const wide = spec({ limit: 10 });
    const narrow = spec({ limit: 1 });
    const unseen = spec({ limit: 7 });
    await store.consume([wide, narrow]);
    const rejected = await store.consume([wide, narrow]);
    expect(rejected.buckets[0]).toMatchObject({ remaining: 9, limited: false });
    const calls = inner.consumes;
    const local = await store.consume([wide, narrow, unseen]);
    expect(inner.consumes).toBe(calls);
    expect(local.allowed).toBe(false);
    expect(local.buckets[0]).toEqual(rejected.buckets[0]);
    expect(local.buckets[1]).toMatchObject({ remaining: 0, limited: true, retryAt: T0 + 60_000 });
    expect(local.buckets[2]).toMatchObject({ remaining: 7, limited: false });
  });

  it('reports every blocked bucket of a locally rejected request as limited, wherever the first block sits', async () => {
    const { clock, inner, store } = setup();
    const room = spec({ limit: 10 });
    const early = spec({ limit: 1, periodMs: 60_000 });
    const late = spec({ limit: 1, periodMs: 120_000 });
    await store.consume([early]);
    await store.consume([late]);
    await store.consume([early]);
    await store.consume([late]);
    clock.advance(1_000);
    const calls = inner.consumes;
    for (const order of [
      [room, early, late],
      [early, room, late],
      [late, early, room],
    ]) {
      const out = await store.consume(order);
      expect(out.allowed).toBe(false);
      expect(out.buckets.map((b) => b.limited)).toEqual(order.map((b) => b !== room));
      expect(out.buckets[order.indexOf(early)]).toMatchObject({ remaining: 0, retryAt: T0 + 60_000 });
      expect(out.buckets[order.indexOf(late)]).toMatchObject({ remaining: 0, retryAt: T0 + 120_000 });
    }
    expect(inner.consumes).toBe(calls);
  });

  it('lets a request of another cost, or under a changed rule, through to the store', async () => {
    const { inner, store } = setup();
    const b = spec({ limit: 5, cost: 2 });
    await store.consume([b]);
    await store.consume([b]);
    expect((await store.consume([b])).allowed).toBe(false); // 1 left, cost 2
    const calls = inner.consumes;
    expect((await store.consume([b])).allowed).toBe(false);
    expect(inner.consumes).toBe(calls);
    expect((await store.consume([{ ...b, cost: 1 }])).allowed).toBe(true);
    expect(inner.consumes).toBe(calls + 1);
    // A reload raised the limit: the old block no longer applies.
    expect((await store.consume([{ ...b, limit: 50 }])).allowed).toBe(true);
  });

  it('forgets a block when the bucket is reset', async () => {
    const { inner, store } = setup();
    const b = spec({ limit: 1 });
    await store.consume([b]);
    await store.consume([b]);
    expect(store.size).toBe(1);
    await store.reset(b);
    expect(inner.resets).toBe(1);
    expect(store.size).toBe(0);
    expect((await store.consume([b])).allowed).toBe(true);
  });

  it('never blocks on a shadow bucket', async () => {
    const { inner, store } = setup();
    const shadow = spec({ limit: 1, shadow: true });
    for (let i = 0; i < 5; i++) expect((await store.consume([shadow])).allowed).toBe(true);
    expect(inner.consumes).toBe(5);
    expect(store.size).toBe(0);
  });

  it('holds at most maxEntries blocks, evicting the oldest', async () => {
    const { inner, store } = setup(10);
    const buckets = Array.from({ length: 25 }, () => spec({ limit: 1 }));
    for (const b of buckets) {
      await store.consume([b]);
      await store.consume([b]);
    }
    expect(store.size).toBe(10);
    const calls = inner.consumes;
    await store.consume([buckets[24]!]);
    expect(inner.consumes).toBe(calls);
    await store.consume([buckets[0]!]); // evicted: asks the store again (which still says no)
    expect(inner.consumes).toBe(calls + 1);
  });

  it("maps the local clock to the store's, so a skewed replica neither lifts nor extends a block", async () => {
    const storeClock = new FakeClock(T0);
    const localClock = new FakeClock(T0 - 5_000); // this replica runs 5 s late
    const inner = new Counting(new MemoryStore({ now: storeClock.now, sweepIntervalMs: 0 }));
    const store = createBlockedCacheStore(inner, { now: localClock.now });
    const b = spec({ limit: 1, periodMs: 10_000 });
    await store.consume([b]);
    await store.consume([b]);
    const advance = (ms: number): void => {
      storeClock.advance(ms);
      localClock.advance(ms);
    };
    advance(9_999);
    expect((await store.consume([b])).now).toBe(T0 + 9_999);
    expect(inner.consumes).toBe(2);
    advance(1);
    expect((await store.consume([b])).allowed).toBe(true);
  });

  it("takes the inner store's synchronous answer without a promise hop, and learns blocks from it", async () => {
    const clock = new FakeClock(T0);
    const inner = new CountingLocal(new MemoryStore({ now: clock.now, sweepIntervalMs: 0 }));
    const store = createBlockedCacheStore(inner, { now: clock.now });
    const b = spec();
    // The decision's promise settles in the first microtask turn, before a reaction queued after it.
    const order: string[] = [];
    const decided = store.consume([b]).then(() => order.push('decision'));
    const next = Promise.resolve().then(() => order.push('next microtask'));
    await Promise.all([decided, next]);
    expect(order).toEqual(['decision', 'next microtask']);
    expect([inner.consumes, inner.locals]).toEqual([0, 1]);
    const outs = [store.consumeLocal([b]), store.consumeLocal([b]), store.consumeLocal([b])];
    expect(outs.map((o) => o?.allowed)).toEqual([true, true, false]);
    // Blocked now: refused here, neither method of the inner store asked.
    expect(store.consumeLocal([b])).toMatchObject({
      allowed: false,
      buckets: [{ remaining: 0, limited: true, retryAt: T0 + 60_000 }],
    });
    expect((await store.consume([b])).allowed).toBe(false);
    expect([inner.consumes, inner.locals, store.localRejections]).toEqual([0, 4, 2]);
  });

  it('consumeLocal answers nothing and changes nothing when the inner store cannot decide without I/O, but refuses a blocked bucket', async () => {
    const { inner, store } = setup();
    const b = spec({ limit: 1 });
    expect(store.consumeLocal([b])).toBeUndefined();
    expect(inner.consumes).toBe(0);
    expect((await store.consume([b])).allowed).toBe(true);
    expect((await store.consume([b])).allowed).toBe(false);
    expect(store.consumeLocal([b])).toMatchObject({ allowed: false, buckets: [{ remaining: 0, limited: true }] });
    expect(store.consumeLocal([spec()])).toBeUndefined();
    expect([inner.consumes, store.localRejections]).toEqual([2, 1]);
  });

  it('with recheckMs (leases), lets one request per period re-check a block with the store, and lifts it when tokens came back', async () => {
    const clock = new FakeClock(T0);
    const memory = new MemoryStore({ now: clock.now, sweepIntervalMs: 0 });
    const inner = new Counting(memory);
    let storeDecides = true;
    const store = createBlockedCacheStore(inner, {
      now: clock.now,
      recheckMs: 1_250,
      storeDecides: () => storeDecides,
    });
    const b = spec({ limit: 2 });
    for (let i = 0; i < 3; i++) await store.consume([b]);
    expect(inner.consumes).toBe(3);
    // Blocked: a flood costs the store nothing until the re-check is due, and consumeLocal refuses too.
    for (let i = 0; i < 100; i++) expect((await store.consume([b])).allowed).toBe(false);
    clock.advance(1_249);
    expect(store.consumeLocal([b])?.allowed).toBe(false);
    expect(inner.consumes).toBe(3);
    // Due: consumeLocal leaves it to consume, which asks the store once; still full, so blocked again.
    clock.advance(1);
    expect(store.consumeLocal([b])).toBeUndefined();
    const recheck = await store.consume([b]);
    // The refusal reports the bucket's real retry time, not the re-check's.
    expect(recheck).toMatchObject({ allowed: false, buckets: [{ limited: true, retryAt: T0 + 60_000 }] });
    for (let i = 0; i < 10; i++) expect((await store.consume([b])).allowed).toBe(false);
    expect(inner.consumes).toBe(4);
    // Another gateway gave a token back (here: the count made smaller), the next re-check finds it.
    await memory.reset(b);
    await memory.consume([b]);
    clock.advance(1_250);
    expect((await store.consume([b])).allowed).toBe(true);
    expect(store.size).toBe(0);
    expect(inner.consumes).toBe(5);
    // While the fault policy answers, a block is kept to its retryAt: what was known full stays refused.
    expect((await store.consume([b])).allowed).toBe(false);
    storeDecides = false;
    clock.advance(5_000);
    for (let i = 0; i < 10; i++) expect((await store.consume([b])).allowed).toBe(false);
    expect(inner.consumes).toBe(6);
  });

  it("re-checks no block while this gateway is the fleet's only one, and does again once another joins", async () => {
    const clock = new FakeClock(T0);
    const inner = new Counting(new MemoryStore({ now: clock.now, sweepIntervalMs: 0 }));
    let gateways = 1;
    const store = createBlockedCacheStore(inner, {
      now: clock.now,
      recheckMs: 1_250,
      othersMayLease: () => gateways > 1,
    });
    const clients = Array.from({ length: 50 }, () => spec({ limit: 1, periodMs: 3_600_000 }));
    for (const b of clients) for (let i = 0; i < 2; i++) await store.consume([b]);
    expect(inner.consumes).toBe(100);
    // Slow clients, each blocked: every request comes after its block's re-check time.
    for (let round = 0; round < 5; round++) {
      clock.advance(2_000);
      for (const b of clients) expect(store.consumeLocal([b])?.allowed).toBe(false);
      for (const b of clients) expect(store.readLocal([b])?.allowed).toBe(false);
    }
    expect(inner.consumes + inner.peeks).toBe(100);
    // A second gateway counted: its leases may come back, so each block is re-checked once more.
    gateways = 2;
    for (const b of clients) expect((await store.consume([b])).allowed).toBe(false);
    for (const b of clients) expect((await store.consume([b])).allowed).toBe(false);
    expect(inner.consumes).toBe(150);
  });

  it('learns a block from a read that shows a bucket full, and answers the next reads synchronously without the store', async () => {
    const { clock, inner, store } = setup();
    const full = spec({ limit: 2 });
    const other = spec({ limit: 50 });
    for (let i = 0; i < 2; i++) expect((await store.consume([full])).allowed).toBe(true);
    // Nothing is known blocked yet: the first read goes to the store, one peek per bucket.
    expect(store.readLocal([other, full])).toBeUndefined();
    const read = await store.read([other, full]);
    expect(read.allowed).toBe(false);
    expect(read.buckets.map((b) => b.limited)).toEqual([false, true]);
    expect(inner.peeks).toBe(2);
    // The read taught the block: the flood's reads are answered here, with the states the read showed.
    for (let i = 0; i < 100; i++) {
      const local = store.readLocal([other, full])!;
      expect(local).toBeDefined();
      expect(local.allowed).toBe(false);
      expect(local.buckets[1]).toMatchObject({ limited: true, remaining: 0, retryAt: read.buckets[1]!.retryAt });
      expect(local.buckets[0]).toEqual(read.buckets[0]);
    }
    expect(inner.peeks).toBe(2);
    // And the consume path answers it too, without the store.
    expect((await store.consume([full])).allowed).toBe(false);
    expect(inner.consumes).toBe(2);
    // Until the window ends: then the store decides again.
    clock.advance(60_000);
    expect(store.readLocal([other, full])).toBeUndefined();
    expect((await store.consume([full])).allowed).toBe(true);
  });

  it('lifts a block when a read shows room for the same cost, and learns nothing from a read before any answer told the clock', async () => {
    const clock = new FakeClock(T0);
    const memory = new MemoryStore({ now: clock.now, sweepIntervalMs: 0 });
    const inner = new Counting(memory);
    const store = createBlockedCacheStore(inner, { now: clock.now });
    const b = spec({ limit: 1 });
    // Filled behind the cache's back: the cache has seen no answer, so the read teaches no block.
    await memory.consume([b]);
    expect((await store.read([b])).allowed).toBe(false);
    expect(store.size).toBe(0);
    expect(store.readLocal([b])).toBeUndefined();
    // After an answer (a refused consume) the block is held; a reset behind its back, then a read, lifts it.
    expect((await store.consume([b])).allowed).toBe(false);
    expect(store.size).toBe(1);
    await memory.reset(b);
    expect(store.readLocal([b])?.allowed).toBe(false);
    clock.advance(1);
    // A read of another cost says nothing of this block.
    expect((await store.read([{ ...b, cost: 2 }])).allowed).toBe(false);
    expect(store.size).toBe(1);
    expect((await store.read([b])).allowed).toBe(true);
    expect(store.size).toBe(0);
    expect((await store.consume([b])).allowed).toBe(true);
  });

  it("learns a block from a store's timed read before any answer, mapped by the clock the read carries", async () => {
    // The store's clock runs 10 s ahead of this replica's: its times are mapped, not taken as local.
    const local = new FakeClock(T0);
    const storeClock = { now: () => local.now() + 10_000 };
    const memory = new MemoryStore({ now: storeClock.now, sweepIntervalMs: 0 });
    const inner = new (class extends Counting {
      reads = 0;
      read(specs: readonly BucketSpec[]): Promise<ConsumeOutcome> {
        this.reads++;
        return memory.read(specs);
      }
    })(memory);
    const store = createBlockedCacheStore(inner, { now: local.now });
    const b = spec({ limit: 1, periodMs: 60_000 });
    // Filled by another replica: this cache has seen no answer, yet its first read teaches the block.
    await memory.consume([b]);
    const read = await store.read([b]);
    expect(read.allowed).toBe(false);
    expect(store.size).toBe(1);
    for (let i = 0; i < 50; i++) expect(store.readLocal([b])?.allowed).toBe(false);
    expect((await store.consume([b])).allowed).toBe(false);
    expect(inner.reads + inner.peeks + inner.consumes).toBe(1);
    // The block lasts until the store's retry time, 10 s earlier on the local clock than its number.
    local.advance(read.buckets[0]!.retryAt - storeClock.now() - 1);
    expect(store.readLocal([b])?.allowed).toBe(false);
    local.advance(1);
    expect(store.readLocal([b])).toBeUndefined();
    expect((await store.consume([b])).allowed).toBe(true);
  });
});

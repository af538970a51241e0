import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emissionIntervalUs } from '../../src/limiter/algorithms.js';
import { StoreError, StoreTimeoutError } from '../../src/limiter/errors.js';
import { MemoryStore } from '../../src/limiter/memory/store.js';
import {
  createRedisStore,
  encodeBucketParams,
  luaScripts,
  MAX_BATCH_REQUESTS,
  type RedisStore,
} from '../../src/limiter/redis/store.js';
import type { BucketSpec, Store } from '../../src/limiter/types.js';
import { FakeClock } from '../support/clock.js';
import {
  readBucketState,
  scriptCalls,
  skipCluster,
  skipRedis,
  startRedis,
  type RedisHandle,
} from '../support/redis.js';
import { freePort } from '../support/servers.js';
import { createStoreFor } from '../../src/limiter/factory.js';
import { composedStoreContracts, storeContract } from './store.contract.js';
import { eventually, pause } from '../support/eventually.js';
import { seededInts } from '../support/random.js';
import { freshBuckets } from '../support/buckets.js';

const spec = freshBuckets((n) => `t${n}:{ip:198.51.100.${n % 250}}`, { limit: 5 });

describe.skipIf(skipRedis('the Redis store tests'))('the Redis store', () => {
  let redis: RedisHandle;
  let admin: Redis;
  const open: Store[] = [];
  async function store(over: { timeoutMs?: number; now?: () => number; url?: string } = {}): Promise<RedisStore> {
    const s = createRedisStore({
      url: over.url ?? redis.url,
      prefix: 'rgtest',
      timeoutMs: over.timeoutMs ?? 1_000,
      ...(over.now ? { now: over.now } : {}),
    });
    open.push(s);
    if (!over.url) await s.ready();
    return s;
  }

  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url);
  });
  afterAll(async () => {
    await Promise.all(open.map((s) => s.close()));
    admin?.disconnect();
    await redis?.stop();
  });

  storeContract('redis', async (clock) => store({ now: clock.now }));
  composedStoreContracts('redis', () => redis.url);

  /** A memory store and a Redis store on one fake clock starting at `ms`, for differential tests. */
  async function againstMemory(ms: number): Promise<{ clock: FakeClock; mem: MemoryStore; red: RedisStore }> {
    const clock = new FakeClock(ms);
    return {
      clock,
      mem: new MemoryStore({ now: clock.now, sweepIntervalMs: 0 }),
      red: await store({ now: clock.now }),
    };
  }

  it('keeps a bucket by the scripted clock, not the wall clock: real time passing a key’s TTL forgets nothing', async () => {
    // On a loaded machine the wall clock runs ahead of a test's fake clock; a key Redis expired by the
    // wall clock made the differential tests below see an empty bucket where the memory store had a full one.
    const clock = new FakeClock(Date.UTC(2026, 10, 21, 19, 0, 0));
    const red = await store({ now: clock.now });
    const b = spec({ limit: 1, periodMs: 100, algorithm: 'token-bucket' });
    expect((await red.consume([b])).allowed).toBe(true);
    // Time itself is the subject: the wall clock passes the key's 100 ms while the scripted clock stands still.
    await pause(250);
    expect((await red.consume([b])).allowed).toBe(false);
    clock.advance(100);
    expect((await red.consume([b])).allowed).toBe(true);
  });

  it('makes the same decisions and reports the same numbers as the memory store, for random traffic', async () => {
    // A differential test of lua/lib.lua against algorithms.ts: odd limits and periods (inexact
    // emission intervals), costs, shadow buckets, several buckets per request, time jumping about.
    const { clock, mem, red } = await againstMemory(Date.UTC(2026, 10, 21, 19, 0, 0) + 7);
    const rand = seededInts(12345);
    const algorithms = ['fixed-window', 'sliding-window', 'token-bucket'] as const;
    const limits = [1, 2, 3, 6, 7, 10];
    const periods = [999, 1_000, 6_001, 7_001, 60_000];
    const pool: BucketSpec[] = [];
    for (let i = 0; i < 24; i++) {
      pool.push(
        spec({
          algorithm: algorithms[i % 3]!,
          limit: limits[rand(limits.length)]!,
          periodMs: periods[rand(periods.length)]!,
          shadow: rand(8) === 0,
        }),
      );
    }
    let rejected = 0;
    for (let step = 0; step < 1_500; step++) {
      clock.advance(rand(8) === 0 ? [999, 3_000, 7_001][rand(3)]! : rand(40));
      const n = 1 + rand(3);
      const picked: BucketSpec[] = [];
      for (let k = 0; k < n; k++)
        picked.push({
          ...pool[rand(6) === 0 ? rand(pool.length) : (step >> 3) % pool.length]!,
          cost: 1 + (rand(3) === 0 ? 1 : 0),
        });
      if (rand(10) === 0) {
        expect(await red.peek(picked[0]!)).toEqual(await mem.peek(picked[0]!));
      } else {
        const expected = await mem.consume(picked);
        expect(await red.consume(picked)).toEqual({ ...expected, decider: 'store' });
        if (!expected.allowed) rejected++;
      }
    }
    // The traffic must reach the interesting branches: plenty of rejections, not only admissions.
    expect(rejected).toBeGreaterThan(200);
  });

  it('sends the consume calls made in one turn as one script call, charging them in arrival order, each all-or-nothing', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 21, 19, 0, 0));
    const mem = new MemoryStore({ now: clock.now, sweepIntervalMs: 0 });
    const red = await store({ now: clock.now });
    const narrow = spec({ limit: 4 });
    const wide = spec({ limit: 100 });
    const calls = Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? [narrow, wide] : [wide, narrow]));
    const scriptsBefore = await scriptCalls(admin);
    const batchesBefore = red.batchesSent;
    const outcomes = await Promise.all(calls.map((c) => red.consume(c)));
    expect(red.batchesSent - batchesBefore).toBe(1);
    expect((await scriptCalls(admin)) - scriptsBefore).toBe(1);
    expect(outcomes.map((o) => o.allowed)).toEqual([true, true, true, true, false, false, false, false, false, false]);
    // A rejected request charged nothing: the wide bucket holds the four admitted ones only.
    expect((await red.peek(wide)).remaining).toBe(96);
    // The same calls one by one on the memory store: the same outcomes, number for number.
    const expected = [];
    for (const c of calls) expected.push(await mem.consume(c));
    expect(outcomes).toEqual(expected.map((o) => ({ ...o, decider: 'store' })));
  });

  it('gives batched calls the same answers as one-by-one calls on the memory store, for random traffic', async () => {
    const { clock, mem, red } = await againstMemory(Date.UTC(2026, 10, 21, 20, 0, 0) + 3);
    const rand = seededInts(777);
    const algorithms = ['fixed-window', 'sliding-window', 'token-bucket'] as const;
    const pool = Array.from({ length: 9 }, (_, i) =>
      spec({ algorithm: algorithms[i % 3]!, limit: 2 + rand(6), periodMs: [1_000, 7_001][rand(2)]!, shadow: i === 8 }),
    );
    const batchesBefore = red.batchesSent;
    let calls = 0;
    let rejected = 0;
    for (let step = 0; step < 150; step++) {
      clock.advance(rand(300));
      const turn = Array.from({ length: 1 + rand(12) }, () =>
        Array.from({ length: 1 + rand(3) }, () => ({ ...pool[rand(pool.length)]!, cost: 1 + rand(2) })),
      );
      const got = await Promise.all(turn.map((c) => red.consume(c)));
      for (let i = 0; i < turn.length; i++) {
        const want = await mem.consume(turn[i]!);
        expect(got[i]).toEqual({ ...want, decider: 'store' });
        if (!want.allowed) rejected++;
      }
      calls += turn.length;
    }
    expect(red.batchesSent - batchesBefore).toBe(150);
    expect(calls).toBeGreaterThan(500);
    expect(rejected).toBeGreaterThan(100);
  });

  it(`splits a turn of more than ${MAX_BATCH_REQUESTS} calls into several batches and still counts exactly`, async () => {
    // A clock of its own: on the wall clock, a burst across a minute's edge is counted in two windows.
    const s = await store({ now: new FakeClock(Date.UTC(2026, 10, 21, 19, 0, 30)).now });
    const b = spec({ limit: 100 });
    const before = s.batchesSent;
    const outcomes = await Promise.all(Array.from({ length: 2 * MAX_BATCH_REQUESTS + 22 }, () => s.consume([b])));
    expect(s.batchesSent - before).toBe(3);
    expect(outcomes.filter((o) => o.allowed)).toHaveLength(100);
    expect(outcomes.slice(0, 100).every((o) => o.allowed)).toBe(true);
  });

  it('fails every call of a batch that times out, each with a StoreTimeoutError, within the timeout', async () => {
    const s = await store({ timeoutMs: 100 });
    await admin.call('CLIENT', 'PAUSE', '400', 'ALL');
    const t0 = Date.now();
    const errors = await Promise.all(Array.from({ length: 5 }, () => s.consume([spec()]).catch((e: unknown) => e)));
    expect(Date.now() - t0).toBeLessThan(300);
    for (const e of errors) expect(e).toBeInstanceOf(StoreTimeoutError);
    // Answered once the CLIENT PAUSE is over (the pausing client is held like every other).
    expect(await admin.ping()).toBe('PONG');
    expect((await s.consume([spec()])).allowed).toBe(true);
  });

  it('holds the calls made while a batch is in flight and sends them together when it is answered', async () => {
    const s = await store();
    const b = spec({ limit: 100 });
    const before = { batches: s.batchesSent, requests: s.batchedRequests };
    // Redis holds the first batch's answer for 150 ms (well within the 1 s timeout).
    await admin.call('CLIENT', 'PAUSE', '150', 'ALL');
    const first = Promise.all(Array.from({ length: 3 }, () => s.consume([b])));
    // The next turns of the event loop, while the first batch is in flight: these must wait for it.
    await new Promise((r) => setImmediate(r));
    const second: Promise<unknown>[] = [];
    for (let turn = 0; turn < 3; turn++) {
      second.push(...Array.from({ length: 4 }, () => s.consume([b])));
      await new Promise((r) => setImmediate(r));
    }
    const outs = [...(await first), ...((await Promise.all(second)) as Awaited<ReturnType<RedisStore['consume']>>[])];
    expect(s.batchedRequests - before.requests).toBe(15);
    // 3 calls, then 12 made over three turns: two batches, not four.
    expect(s.batchesSent - before.batches).toBe(2);
    expect(outs.map((o) => o.buckets[0]!.remaining)).toEqual(Array.from({ length: 15 }, (_, i) => 99 - i));
  });

  it('counts the wait behind a batch in flight against the timeout: no call waits longer than the timeout in all', async () => {
    const s = await store({ timeoutMs: 200 });
    await admin.call('CLIENT', 'PAUSE', '700', 'ALL');
    const batches = s.batchesSent;
    const first = s.consume([spec()]).catch((e: unknown) => e);
    await eventually(() => s.batchesSent > batches, { what: 'the first batch in flight', everyMs: 1 });
    const t1 = Date.now();
    const queued = s.consume([spec()]).catch((e: unknown) => e);
    expect(await first).toBeInstanceOf(StoreTimeoutError);
    expect(await queued).toBeInstanceOf(StoreTimeoutError);
    const waited = Date.now() - t1;
    // About 180 ms behind the first batch, then the 20 ms left of its own timeout: 200 ms, not 380.
    expect(waited).toBeGreaterThanOrEqual(190);
    expect(waited).toBeLessThan(300);
    // Queued behind the pause like every client: answered once Redis runs again.
    await admin.call('PING');
    expect((await s.consume([spec()])).allowed).toBe(true);
  });

  it('stores a token-bucket TAT as exact integer microseconds', async () => {
    const s = await store();
    const b = spec({ algorithm: 'token-bucket', limit: 7, periodMs: 1_000 });
    const out = await s.consume([b]);
    const [tat, b2, c2] = (await readBucketState(admin, `rgtest:${b.key}`))!;
    expect([tat, b2, c2]).toEqual([out.now * 1000 + emissionIntervalUs(b), 0, 0]);
    expect(Number.isInteger(tat) && tat > 1e15).toBe(true);
  });

  it('reads the clock from Redis TIME and expires a key at its state expireAt', async () => {
    const s = await store();
    const b = spec({ periodMs: 3_600_000 });
    const before = Date.now();
    const out = await s.consume([b]);
    // Same machine: Redis TIME and ours agree to within the round trip.
    expect(out.now).toBeGreaterThanOrEqual(before - 5);
    expect(out.now).toBeLessThanOrEqual(Date.now() + 5);
    const end = out.now - (out.now % 3_600_000) + 3_600_000;
    expect(out.buckets[0]!.resetAt).toBe(end);
    expect(Number(await admin.call('PEXPIRETIME', `rgtest:${b.key}`))).toBe(end);
  });

  it('reloads its scripts by itself after Redis forgot them (SCRIPT FLUSH, or a restart)', async () => {
    const s = await store();
    const b = spec({ limit: 2 });
    await s.consume([b]);
    await admin.script('FLUSH');
    expect((await s.consume([b])).buckets[0]!.remaining).toBe(0);
    expect((await s.peek(b)).limited).toBe(true);
  });

  it('reloads the batch script too: a batch sent after SCRIPT FLUSH is answered, every call counted once', async () => {
    const s = await store();
    const bs = [spec({ limit: 3 }), spec({ limit: 3 }), spec({ limit: 3 })];
    await s.consume([bs[0]!]);
    await admin.script('FLUSH');
    const before = s.batchesSent;
    const outs = await Promise.all(bs.map((b) => s.consume([b])));
    expect(s.batchesSent - before).toBe(1);
    expect(outs.map((o) => o.buckets[0]!.remaining)).toEqual([1, 2, 2]);
  });

  it('loads its scripts as it connects: the first calls are EVALSHA, never a NOSCRIPT round trip', async () => {
    await admin.config('RESETSTAT');
    await admin.script('FLUSH');
    const s = await store();
    await s.consume([spec()]);
    await Promise.all([spec(), spec()].map((b) => s.consume([b])));
    const info = await admin.info('commandstats');
    expect(info).not.toMatch(/^cmdstat_eval:/m);
    expect(info).toMatch(/^cmdstat_evalsha:calls=2,.*failed_calls=0/m);
  });

  it('counts keys with characters beyond ASCII under their own bytes (a header or claim value)', async () => {
    const s = await store();
    const a = { ...spec({ limit: 2 }), key: `t:{hdr:${'é'.repeat(3)}✓}` };
    const b = { ...spec({ limit: 2 }), key: `t:{hdr:${'e'.repeat(3)}✓}` };
    expect((await s.consume([a])).buckets[0]!.remaining).toBe(1);
    expect((await s.consume([a, b])).buckets.map((x) => x.remaining)).toEqual([0, 1]);
    expect(await admin.exists(`rgtest:${a.key}`)).toBe(1);
  });

  it('rejects with a StoreTimeoutError once the timeout passes when Redis does not answer, and works again after', async () => {
    const s = await store({ timeoutMs: 100 });
    const b = spec();
    await admin.call('CLIENT', 'PAUSE', '600', 'ALL');
    const t0 = Date.now();
    const err = await s.consume([b]).catch((e: unknown) => e);
    const waited = Date.now() - t0;
    expect(err).toBeInstanceOf(StoreTimeoutError);
    expect((err as StoreError).reason).toBe('timeout');
    expect(waited).toBeGreaterThanOrEqual(95);
    expect(waited).toBeLessThan(300);
    // Answered once the CLIENT PAUSE is over, after the calls held before it (the timed-out one included).
    expect(await admin.ping()).toBe('PONG');
    // The late reply of the timed-out call was dropped; the charge it made is real (it was executed).
    expect((await s.consume([b])).buckets[0]!.remaining).toBe(3);
  });

  it('fails at once with a connection error, without queueing, while Redis is unreachable', async () => {
    const port = await freePort();
    const s = await store({ url: `redis://127.0.0.1:${port}`, timeoutMs: 1_000 });
    const t0 = Date.now();
    const err = await s.consume([spec()]).catch((e: unknown) => e);
    expect(Date.now() - t0).toBeLessThan(100);
    expect(err).toBeInstanceOf(StoreError);
    expect((err as StoreError).reason).toBe('connection');
    await expect(s.ping()).rejects.toBeInstanceOf(StoreError);
    await expect(s.ready(150)).rejects.toThrow(/not connected/);
  });

  it('reports a script failure as such, not as the connection', async () => {
    const s = await store();
    const b = spec();
    await admin.hset(`rgtest:${b.key}`, 'x', '1'); // a foreign key of the wrong type
    const err = await s.consume([b]).catch((e: unknown) => e);
    expect((err as StoreError).reason).toBe('script');
  });
});

describe.skipIf(skipCluster('the demoted-master tests'))(
  'a Redis that is a replica (a demoted master, or a URL pointing at one)',
  () => {
    it('reports READONLY as readonly, and is not "up": decisions do not come from it although it answers PING', async () => {
      const master = await startRedis(['--appendonly', 'no']);
      const replica = await startRedis(['--replicaof', '127.0.0.1', String(master.node.port)]);
      try {
        const handle = await createStoreFor({ url: replica.url, prefix: 'rgro', timeout: 1_000, onError: 'deny' });
        const raw = createRedisStore({ url: replica.url, prefix: 'rgro', timeoutMs: 1_000 });
        await raw.ready();
        const err = await raw.consume([spec()]).catch((e: unknown) => e);
        expect((err as StoreError).reason, String(err)).toBe('readonly');
        await raw.close();
        const ping = new Redis(replica.url);
        expect(await ping.ping()).toBe('PONG');
        ping.disconnect();
        expect(await handle.reachable()).toBe(false);
        const primary = await createStoreFor({ url: master.url, prefix: 'rgro', timeout: 1_000, onError: 'deny' });
        expect(await primary.reachable()).toBe(true);
        await Promise.all([handle.store.close(), primary.store.close()]);
      } finally {
        await replica.stop();
        await master.stop();
      }
    });
  },
);

describe.skipIf(skipRedis('the refund script tests'))('the refund script', () => {
  let redis: RedisHandle;
  let client: Redis &
    Record<'consume1' | 'refund1' | 'peek1', (...args: (string | number | Buffer)[]) => Promise<number[]>>;
  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.url) as typeof client;
    client.defineCommand('consume1', { lua: luaScripts.consume, numberOfKeys: 1 });
    client.defineCommand('refund1', { lua: luaScripts.refund, numberOfKeys: 1 });
    client.defineCommand('peek1', { lua: luaScripts.peek, numberOfKeys: 1 });
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });

  it('never gives a token bucket back more than the reservation still weighs, even when an admission clamped the TAT meanwhile', async () => {
    // Capacity 2, one token per second. Two reservations R1, R2 at t0 (TAT t0 + 2 s). R1 is refunded
    // half a second later: half of its weight has decayed, so only that half can safely come back
    // (TAT t0 + 1.5 s). At t0 + 1.6 s an admitted request finds the bucket full and clamps the TAT to
    // its own time (t0 + 2.6 s). R2's refund then must give back nothing: the bucket now holds exactly
    // the one admitted request, and one more request (not two) may pass.
    const t0 = Date.UTC(2026, 10, 21, 19, 0, 0);
    const key = 'refund-tb:{ip:1}';
    const argv = [
      encodeBucketParams([{ algorithm: 'token-bucket', limit: 2, periodMs: 2_000, cost: 1, shadow: false }]),
    ];
    const r1 = await client.consume1(key, t0, 'reserve', ...argv);
    const r2 = await client.consume1(key, t0, 'reserve', ...argv);
    expect([r1[0], r2[0]]).toEqual([1, 1]);
    expect(await client.refund1(key, t0 + 500, t0, 'token-bucket', 2, 2_000, 1, r1[6]!)).toBe(1);
    expect(await readBucketState(client, key)).toEqual([(t0 + 1_500) * 1000, 0, 0]);
    const admitted = await client.consume1(key, t0 + 1_600, '', ...argv);
    expect(admitted[0]).toBe(1);
    expect(await client.refund1(key, t0 + 1_600, t0, 'token-bucket', 2, 2_000, 1, r2[6]!)).toBe(0);
    const next = [
      await client.consume1(key, t0 + 1_600, '', ...argv),
      await client.consume1(key, t0 + 1_600, '', ...argv),
    ];
    expect(next.map((r) => r[0])).toEqual([1, 0]);
  });

  it('takes a window charge back from the previous count when the sliding window rolled over meanwhile', async () => {
    const t0 = Date.UTC(2026, 10, 21, 19, 0, 0);
    const key = 'refund-sw:{ip:1}';
    const argv = [
      encodeBucketParams([{ algorithm: 'sliding-window', limit: 4, periodMs: 1_000, cost: 1, shadow: false }]),
    ];
    const reserved = await client.consume1(key, t0 + 900, 'reserve', ...argv);
    await client.consume1(key, t0 + 1_100, '', ...argv); // next window: the reservation is now "previous"
    expect(await readBucketState(client, key)).toEqual([t0 + 1_000, 1, 1]);
    expect(await client.refund1(key, t0 + 1_100, t0 + 900, 'sliding-window', 4, 1_000, 1, reserved[6]!)).toBe(1);
    expect(await readBucketState(client, key)).toEqual([t0 + 1_000, 1, 0]);
    // A window later still, the charge weighs nothing and nothing is given back.
    const late = await client.consume1(key, t0 + 2_100, 'reserve', ...argv);
    await client.consume1(key, t0 + 4_000, '', ...argv);
    expect(await client.refund1(key, t0 + 4_000, t0 + 2_100, 'sliding-window', 4, 1_000, 1, late[6]!)).toBe(0);
  });
});

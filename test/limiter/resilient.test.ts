import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreError, StoreTimeoutError } from '../../src/limiter/errors.js';
import { MemoryStore } from '../../src/limiter/memory.js';
import { createRedisStore } from '../../src/limiter/redis.js';
import { createResilientStore, type StoreEvent } from '../../src/limiter/resilient.js';
import { StoreUnavailableError, type BucketSpec, type BucketState, type ConsumeOutcome, type Store } from '../../src/limiter/types.js';
import { readBucketState, skipRedis, startRedis, type RedisHandle } from '../support/redis.js';

let seq = 0;
function spec(over: Partial<BucketSpec> = {}): BucketSpec {
  return { key: `r${++seq}:{ip:192.0.2.${seq % 250}}`, limit: 3, periodMs: 60_000, algorithm: 'fixed-window', cost: 1, shadow: false, onError: 'local', ...over };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A primary that works, fails at once, or hangs until a timeout, on command; counts what reaches it. */
class ScriptedPrimary implements Store {
  mode: 'ok' | 'fail' | 'hang' = 'ok';
  calls = 0;
  pings = 0;
  private readonly inner = new MemoryStore({ sweepIntervalMs: 0 });

  consume(specs: readonly BucketSpec[]): Promise<ConsumeOutcome> {
    return this.run(() => this.inner.consume(specs));
  }
  peek(spec: BucketSpec): Promise<BucketState> {
    return this.run(() => this.inner.peek(spec));
  }
  reset(spec: BucketSpec): Promise<void> {
    return this.run(() => this.inner.reset(spec));
  }
  ping(): Promise<void> {
    this.pings++;
    return this.mode === 'ok' ? Promise.resolve() : Promise.reject(new StoreError('connection', 'down'));
  }
  close(): Promise<void> {
    return this.inner.close();
  }
  private run<T>(f: () => Promise<T>): Promise<T> {
    this.calls++;
    if (this.mode === 'fail') return Promise.reject(new StoreError('connection', 'connection refused'));
    if (this.mode === 'hang') return sleep(30).then(() => Promise.reject(new StoreTimeoutError(30, 'consume')));
    return f();
  }
}

function setup(breaker = { failureThreshold: 3, openMs: 100 }) {
  const primary = new ScriptedPrimary();
  const events: StoreEvent[] = [];
  const store = createResilientStore(primary, { fallback: new MemoryStore({ sweepIntervalMs: 0 }), breaker, onEvent: (e) => events.push(e) });
  return { primary, events, store };
}

describe('the fault policy', () => {
  it("counts onError: local buckets in the fallback store, fails open for allow, and answers 503 for deny while the store fails", async () => {
    const { primary, store } = setup({ failureThreshold: 100, openMs: 100 });
    primary.mode = 'fail';
    const local = spec({ onError: 'local', limit: 2 });
    const allow = spec({ onError: 'allow', limit: 2 });
    const deny = spec({ onError: 'deny' });
    const seen = [await store.consume([local]), await store.consume([local]), await store.consume([local])];
    expect(seen.map((o) => o.allowed)).toEqual([true, true, false]);
    expect(seen.map((o) => o.buckets[0]!.remaining)).toEqual([1, 0, 0]);
    for (let i = 0; i < 5; i++) {
      const open = await store.consume([allow]);
      expect(open.allowed).toBe(true);
      expect(open.buckets[0]).toMatchObject({ remaining: 2, limited: false });
    }
    await expect(store.consume([deny])).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(store.fallbackActive).toBe(true);
    await store.close();
  });

  it('lets deny win in a request of mixed policies, and otherwise counts local buckets while skipping allow buckets', async () => {
    const { primary, store } = setup({ failureThreshold: 100, openMs: 100 });
    primary.mode = 'fail';
    const local = spec({ onError: 'local', limit: 1 });
    const allow = spec({ onError: 'allow', limit: 5 });
    const deny = spec({ onError: 'deny' });
    await expect(store.consume([allow, local, deny])).rejects.toBeInstanceOf(StoreUnavailableError);
    const first = await store.consume([allow, local]);
    expect(first.allowed).toBe(true);
    expect(first.buckets).toMatchObject([{ remaining: 5, limited: false }, { remaining: 0, limited: false }]);
    const second = await store.consume([allow, local]);
    expect(second.allowed).toBe(false);
    expect(second.buckets).toMatchObject([{ remaining: 5, limited: false }, { remaining: 0, limited: true }]);
    // The deny request charged nothing locally: the local bucket saw exactly the two requests above.
    await store.close();
  });

  it('opens the circuit after consecutive failures so that no call reaches the failing store, then lets one probe through and closes on success', async () => {
    const { primary, store, events } = setup({ failureThreshold: 3, openMs: 100 });
    const b = spec({ limit: 100 });
    await store.consume([b]);
    primary.mode = 'fail';
    for (let i = 0; i < 3; i++) await store.consume([b]);
    expect(store.circuit).toBe('open');
    const callsWhenOpened = primary.calls;
    for (let i = 0; i < 20; i++) await store.consume([b]);
    expect(primary.calls).toBe(callsWhenOpened);
    expect(events.filter((e) => e.type === 'error' && e.reason === 'circuit_open')).toHaveLength(20);
    expect(events.filter((e) => e.type === 'error' && e.reason === 'connection')).toHaveLength(3);

    primary.mode = 'ok';
    await sleep(150);
    // The background ping was the probe (this primary has ping()); with no request needed it closed.
    expect(primary.pings).toBeGreaterThanOrEqual(1);
    expect(store.circuit).toBe('closed');
    expect(store.fallbackActive).toBe(false);
    await store.consume([b]);
    expect(primary.calls).toBe(callsWhenOpened + 1);
    expect(events.filter((e) => e.type === 'fallback_active')).toEqual([
      { type: 'fallback_active', active: true },
      { type: 'fallback_active', active: false },
    ]);
    expect(events.filter((e) => e.type === 'circuit').map((e) => (e as { state: string }).state)).toEqual(['open', 'half-open', 'closed']);
    await store.close();
  });

  it('uses the next request as the probe when the primary has no ping, and only that one while it is in flight', async () => {
    const primary = new ScriptedPrimary();
    const noPing: Store = { consume: (s) => primary.consume(s), peek: (s) => primary.peek(s), reset: (s) => primary.reset(s), close: () => primary.close() };
    const store = createResilientStore(noPing, { fallback: new MemoryStore({ sweepIntervalMs: 0 }), breaker: { failureThreshold: 1, openMs: 50 } });
    const b = spec({ limit: 100 });
    primary.mode = 'hang';
    await store.consume([b]);
    expect(store.circuit).toBe('open');
    await sleep(60);
    const calls = primary.calls;
    // Three at once in half-open: one probes (and hangs until its timeout), two decide locally at once.
    const probe = store.consume([b]);
    const t0 = Date.now();
    const quick = Promise.all([store.consume([b]), store.consume([b])]).then(() => Date.now() - t0);
    expect(await quick).toBeLessThan(20);
    await probe;
    expect(primary.calls).toBe(calls + 1);
    expect(store.circuit).toBe('open');
    primary.mode = 'ok';
    await sleep(60);
    await store.consume([b]);
    expect(store.circuit).toBe('closed');
    await store.close();
  });

  it('counts only consecutive failures towards opening the circuit', async () => {
    const { primary, store } = setup({ failureThreshold: 3, openMs: 100 });
    const b = spec({ limit: 100 });
    for (let i = 0; i < 5; i++) {
      primary.mode = 'fail';
      await store.consume([b]);
      await store.consume([b]);
      primary.mode = 'ok';
      await store.consume([b]);
    }
    expect(store.circuit).toBe('closed');
    await store.close();
  });

  it('applies the policy to peeks and resets the local count along with the shared one', async () => {
    const { primary, store } = setup({ failureThreshold: 100, openMs: 100 });
    const local = spec({ limit: 2 });
    primary.mode = 'fail';
    await store.consume([local]);
    expect((await store.peek(local)).remaining).toBe(1);
    expect(await store.peek(spec({ onError: 'allow', limit: 9 }))).toMatchObject({ remaining: 9 });
    await expect(store.peek(spec({ onError: 'deny' }))).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(store.reset(local)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect((await store.peek(local)).remaining).toBe(2); // the local count was reset all the same
    await store.close();
  });
});

describe.skipIf(skipRedis('the Redis fault tests'))('the fault policy over a real Redis', () => {
  let redis: RedisHandle;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => redis?.stop());

  const TIMEOUT = 100;
  /** What "a small constant" may add to the timeout: scheduling jitter on a loaded test machine. */
  const SLACK = 60;

  it('survives Redis being killed mid-traffic: nothing waits past the timeout, each policy holds, the circuit opens, and it recovers by itself after a restart', async () => {
    if (redis.source === 'env') return; // cannot kill an external Redis
    const events: StoreEvent[] = [];
    const redisStore = createRedisStore({ url: redis.url, prefix: 'fault', timeoutMs: TIMEOUT });
    await redisStore.ready();
    const store = createResilientStore(redisStore, {
      fallback: new MemoryStore({ sweepIntervalMs: 0 }),
      breaker: { failureThreshold: 3, openMs: 150 },
      onEvent: (e) => events.push(e),
    });
    const traffic = spec({ limit: 1_000_000 });
    let slowest = 0;
    let running = true;
    const loop = (async () => {
      while (running) {
        const t0 = performance.now();
        await Promise.all([store.consume([traffic]), store.consume([traffic]), store.consume([traffic])]);
        slowest = Math.max(slowest, performance.now() - t0);
        await sleep(2);
      }
    })();
    await sleep(100);
    expect(store.fallbackActive).toBe(false);

    await redis.node.kill();
    await sleep(100);
    const local = spec({ onError: 'local', limit: 2 });
    const allow = spec({ onError: 'allow', limit: 2 });
    const deny = spec({ onError: 'deny' });
    expect((await Promise.all([1, 2, 3].map(() => store.consume([local])))).map((o) => o.allowed).sort()).toEqual([false, true, true]);
    expect((await store.consume([allow, allow])).buckets).toMatchObject([{ remaining: 2 }, { remaining: 2 }]);
    await expect(store.consume([deny])).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(store.fallbackActive).toBe(true);
    expect(store.circuit).not.toBe('closed');
    expect(events.some((e) => e.type === 'error' && e.reason === 'circuit_open')).toBe(true);

    await redis.node.restart();
    const deadline = Date.now() + 5_000;
    while (store.fallbackActive && Date.now() < deadline) await sleep(20);
    expect(store.fallbackActive).toBe(false);
    expect(store.circuit).toBe('closed');
    // Decisions are Redis's again: the charge lands in the (restarted, empty) server.
    const back = spec({ limit: 5 });
    expect((await store.consume([back])).buckets[0]!.remaining).toBe(4);
    const admin = new Redis(redis.url);
    expect((await readBucketState(admin, `fault:${back.key}`))?.slice(1)).toEqual([1, 0]);
    admin.disconnect();

    running = false;
    await loop;
    expect(slowest).toBeLessThan(TIMEOUT + SLACK);
    await store.close();
  });

  it('costs at most the timeout per call while Redis hangs, and nothing once the circuit is open', async () => {
    const redisStore = createRedisStore({ url: redis.url, prefix: 'hang', timeoutMs: TIMEOUT });
    await redisStore.ready();
    const events: StoreEvent[] = [];
    const store = createResilientStore(redisStore, {
      fallback: new MemoryStore({ sweepIntervalMs: 0 }),
      breaker: { failureThreshold: 3, openMs: 5_000 },
      onEvent: (e) => events.push(e),
    });
    const b = spec({ limit: 100 });
    await store.consume([b]);
    const admin = new Redis(redis.url);
    await admin.call('CLIENT', 'PAUSE', '1500', 'ALL');
    const took: number[] = [];
    for (let i = 0; i < 6; i++) {
      const t0 = performance.now();
      const out = await store.consume([b]);
      took.push(performance.now() - t0);
      expect(out.allowed).toBe(true); // counted locally
    }
    for (const t of took.slice(0, 3)) {
      expect(t).toBeGreaterThanOrEqual(TIMEOUT - 5);
      expect(t).toBeLessThan(TIMEOUT + SLACK);
    }
    for (const t of took.slice(3)) expect(t).toBeLessThan(10);
    expect(events.filter((e) => e.type === 'error').map((e) => (e as { reason: string }).reason)).toEqual([
      'timeout',
      'timeout',
      'timeout',
      'circuit_open',
      'circuit_open',
      'circuit_open',
    ]);
    await admin.call('CLIENT', 'UNPAUSE');
    admin.disconnect();
    await store.close();
  });
});

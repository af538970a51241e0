/**
 * The fault policy and its breaker. Time is a FakeClock injected into the breaker: no test here sleeps
 * or reads the wall clock. The real-Redis tests wait for events (a state change, a log line), never
 * for a time to pass.
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { StoreError, StoreTimeoutError } from '../../src/limiter/errors.js';
import { MemoryStore } from '../../src/limiter/memory/store.js';
import { createRedisStore } from '../../src/limiter/redis/store.js';
import { createResilientStore, type StoreEvent } from '../../src/limiter/resilient.js';
import {
  StoreUnavailableError,
  type BucketSpec,
  type BucketState,
  type ConsumeOutcome,
  type Store,
} from '../../src/limiter/types.js';
import { FakeClock } from '../support/clock.js';
import { readBucketState, skipRedis, skipUnlessOwnRedis, redisFixture } from '../support/redis.js';
import { freshBuckets } from '../support/buckets.js';

const spec = freshBuckets((n) => `r${n}:{ip:192.0.2.${n % 250}}`);

/** Lets the promise callbacks queued so far run (no time passes). */
const settle = (): Promise<void> => new Promise((r) => setImmediate(r));

/** A primary that works, fails at once, or hangs until released, on command; counts what reaches it. */
class ScriptedPrimary implements Store {
  mode: 'ok' | 'fail' | 'hang' = 'ok';
  calls = 0;
  pings = 0;
  private hanging: (() => void)[] = [];
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
  /** Another gateway's charges, straight to the shared count. */
  chargedElsewhere(spec: BucketSpec, n: number): Promise<ConsumeOutcome> {
    return this.inner.consume([{ ...spec, cost: n }]);
  }
  /** Ends the hanging calls as their store timeout would. */
  timeOutHanging(): void {
    for (const fail of this.hanging.splice(0)) fail();
  }
  private run<T>(f: () => Promise<T>): Promise<T> {
    this.calls++;
    if (this.mode === 'fail') return Promise.reject(new StoreError('connection', 'connection refused'));
    if (this.mode === 'hang')
      return new Promise<T>((_, reject) => this.hanging.push(() => reject(new StoreTimeoutError(30, 'consume'))));
    return f();
  }
}

function setup(breaker = { failureThreshold: 3, openMs: 100 }, primary: Store = new ScriptedPrimary()) {
  const clock = new FakeClock();
  const events: StoreEvent[] = [];
  const store = createResilientStore(primary, {
    fallback: new MemoryStore({ sweepIntervalMs: 0, now: clock.now }),
    breaker,
    clock,
    onEvent: (e) => events.push(e),
  });
  return { events, store, clock };
}

/** A store whose primary fails every call (the circuit far from opening), and a bucket of each fault policy. */
function failingStore(limits: { local: number; allow: number }) {
  const primary = new ScriptedPrimary();
  const parts = setup({ failureThreshold: 100, openMs: 100 }, primary);
  primary.mode = 'fail';
  return {
    ...parts,
    local: spec({ onError: 'local', limit: limits.local }),
    allow: spec({ onError: 'allow', limit: limits.allow }),
    deny: spec({ onError: 'deny' }),
  };
}

/** The fault policy of one gateway of two (its local share is half a limit) over a scripted primary, on `clock`. */
function oneOfTwoGateways(clock: FakeClock, openMs: number) {
  const primary = new ScriptedPrimary();
  const fallback = new MemoryStore({ sweepIntervalMs: 0, now: clock.now });
  return {
    primary,
    store: createResilientStore(primary, { fallback, gateways: 2, breaker: { failureThreshold: 100, openMs }, clock }),
  };
}

describe('the fault policy', () => {
  it('counts onError: local buckets in the fallback store, fails open for allow, and answers 503 for deny while the store fails', async () => {
    const { store, events, local, allow, deny } = failingStore({ local: 2, allow: 2 });
    const seen = [await store.consume([local]), await store.consume([local]), await store.consume([local])];
    expect(seen.map((o) => o.allowed)).toEqual([true, true, false]);
    expect(seen.map((o) => o.buckets[0]!.remaining)).toEqual([1, 0, 0]);
    // The third was rejected by the local count: reported as a local rejection (a metric).
    expect(events.filter((e) => e.type === 'local_rejection')).toHaveLength(1);
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
    const { store, events, local, allow, deny } = failingStore({ local: 1, allow: 5 });
    await expect(store.consume([allow, local, deny])).rejects.toBeInstanceOf(StoreUnavailableError);
    const first = await store.consume([allow, local]);
    expect(first.allowed).toBe(true);
    expect(first.buckets).toMatchObject([
      { remaining: 5, limited: false },
      { remaining: 0, limited: false },
    ]);
    const second = await store.consume([allow, local]);
    expect(second.allowed).toBe(false);
    expect(second.buckets).toMatchObject([
      { remaining: 5, limited: false },
      { remaining: 0, limited: true },
    ]);
    expect(events.filter((e) => e.type === 'local_rejection')).toHaveLength(1);
    // The deny request charged nothing locally: the local bucket saw exactly the two requests above.
    await store.close();
  });

  it('opens the circuit after consecutive failures so that no call reaches the failing store, then lets one probe through and closes on success', async () => {
    const primary = new ScriptedPrimary();
    const { store, events, clock } = setup({ failureThreshold: 3, openMs: 100 }, primary);
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
    clock.advance(99);
    await settle();
    expect(primary.pings).toBe(0); // still open: nothing probes before openMs
    expect(store.circuit).toBe('open');
    clock.advance(1);
    await settle();
    // The background ping was the probe (this primary has ping()); with no request needed it closed.
    expect(primary.pings).toBe(1);
    expect(store.circuit).toBe('closed');
    expect(store.fallbackActive).toBe(false);
    await store.consume([b]);
    // Two calls: the write-back of what the bucket admitted locally meanwhile, then the decision.
    expect(primary.calls).toBe(callsWhenOpened + 2);
    const fallback = events.filter((e) => e.type === 'fallback_active');
    expect(fallback.map((e) => e.active)).toEqual([true, false]);
    expect(fallback[0]).toMatchObject({ cause: expect.any(StoreError) });
    expect(events.filter((e) => e.type === 'circuit').map((e) => (e as { state: string }).state)).toEqual([
      'open',
      'half-open',
      'closed',
    ]);
    await store.close();
  });

  it('opens again when the background probe fails, and probes again one openMs later', async () => {
    const primary = new ScriptedPrimary();
    const { store, clock } = setup({ failureThreshold: 1, openMs: 100 }, primary);
    primary.mode = 'fail';
    await store.consume([spec()]);
    expect(store.circuit).toBe('open');
    clock.advance(100);
    await settle();
    expect(primary.pings).toBe(1);
    expect(store.circuit).toBe('open');
    primary.mode = 'ok';
    clock.advance(100);
    await settle();
    expect(primary.pings).toBe(2);
    expect(store.circuit).toBe('closed');
    await store.close();
    expect(clock.pendingTimers).toBe(0);
  });

  it('uses the next request as the probe when the primary has no ping, and only that one while it is in flight', async () => {
    const primary = new ScriptedPrimary();
    const noPing: Store = {
      consume: (s) => primary.consume(s),
      peek: (s) => primary.peek(s),
      reset: (s) => primary.reset(s),
      close: () => primary.close(),
    };
    const { store, clock } = setup({ failureThreshold: 1, openMs: 50 }, noPing);
    const b = spec({ limit: 100 });
    primary.mode = 'hang';
    const first = store.consume([b]);
    primary.timeOutHanging();
    await first;
    expect(store.circuit).toBe('open');
    expect(clock.pendingTimers).toBe(0); // no background probe without ping()
    clock.advance(50);
    const calls = primary.calls;
    // Three at once in half-open: one probes (and hangs until its timeout), two decide locally at once.
    let probeSettled = false;
    const probe = store.consume([b]).finally(() => (probeSettled = true));
    const quick = await Promise.all([store.consume([b]), store.consume([b])]);
    expect(quick.map((o) => o.allowed)).toEqual([true, true]);
    expect(probeSettled).toBe(false);
    expect(store.circuit).toBe('half-open');
    primary.timeOutHanging();
    await probe;
    expect(primary.calls).toBe(calls + 1);
    expect(store.circuit).toBe('open');
    primary.mode = 'ok';
    clock.advance(50);
    await store.consume([b]);
    expect(store.circuit).toBe('closed');
    await store.close();
  });

  it('probes in the background while the fault policy answers below the threshold, so recovery needs no request', async () => {
    const primary = new ScriptedPrimary();
    const { store, events, clock } = setup({ failureThreshold: 5, openMs: 100 }, primary);
    const b = spec({ limit: 100 });
    primary.mode = 'fail';
    await store.consume([b]); // one failure: the fallback answers, the breaker stays closed
    expect(store.circuit).toBe('closed');
    expect(store.fallbackActive).toBe(true);
    primary.mode = 'ok';
    clock.advance(100);
    await settle();
    // No request came (a client the blocked cache answers sends none): the probe alone saw the store back.
    expect(primary.pings).toBe(1);
    expect(store.fallbackActive).toBe(false);
    expect(events.filter((e) => e.type === 'fallback_active').map((e) => (e as { active: boolean }).active)).toEqual([
      true,
      false,
    ]);
    clock.advance(1_000);
    await settle();
    expect(primary.pings).toBe(1); // healthy again: no more probes
    await store.close();
  });

  it('counts only consecutive failures towards opening the circuit', async () => {
    const primary = new ScriptedPrimary();
    const { store } = setup({ failureThreshold: 3, openMs: 100 }, primary);
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

  it('keeps probing when a timer fires before the clock says the open period is over (issue 19: recovery without traffic)', async () => {
    // Node schedules a timer from the event loop's cached time, which lags Date.now() by however long
    // the current turn has run: on a busy machine the probe's timer fires a few ms "early". The probe
    // was then dropped for good, and only a request reaching the store could close the breaker.
    const clock = new FakeClock();
    const early: typeof clock.after = (ms, fn) => clock.after(Math.max(1, ms - 3), fn);
    const primary = new ScriptedPrimary();
    const store = createResilientStore(primary, {
      fallback: new MemoryStore({ sweepIntervalMs: 0, now: clock.now }),
      breaker: { failureThreshold: 1, openMs: 100 },
      clock: { now: clock.now, after: early },
    });
    primary.mode = 'fail';
    await store.consume([spec()]);
    expect(store.circuit).toBe('open');
    primary.mode = 'ok';
    for (let i = 0; i < 10 && store.circuit !== 'closed'; i++) {
      clock.advance(50);
      await settle();
    }
    // No request came: the background probe alone closed it.
    expect(primary.pings).toBeGreaterThanOrEqual(1);
    expect(store.circuit).toBe('closed');
    expect(store.fallbackActive).toBe(false);
    await store.close();
  });

  it('keeps a breaker per master: a dead master sends only its own keys to the fault policy, and a promotion ends it', async () => {
    const primary = new ScriptedPrimary();
    const dead = new Set<string>();
    let promote: (from: string, to: string, node: string) => void = () => {};
    const routed: Store & {
      nodesOf(s: readonly BucketSpec[]): string[];
      ping(node?: string): Promise<void>;
      onPromotion(fn: typeof promote): void;
    } = {
      consume: (s) => {
        const down = [...new Set(s.map((b) => nodeOf([b])))].filter((n) => dead.has(n));
        if (down.length === 0) return primary.consume(s);
        const err = new StoreError('connection', 'down');
        err.nodes = down;
        return Promise.reject(err);
      },
      peek: (s) => primary.peek(s),
      reset: (s) => primary.reset(s),
      close: () => primary.close(),
      nodesOf: (s) => [...new Set(s.map((b) => nodeOf([b])))],
      ping: (node) =>
        node !== undefined && dead.has(node) ? Promise.reject(new StoreError('timeout', 'frozen')) : Promise.resolve(),
      onPromotion: (fn) => void (promote = fn),
    };
    function nodeOf(s: readonly BucketSpec[]): string {
      return s[0]!.key.startsWith('a') ? 'A' : 'B';
    }
    const { store, events, clock } = setup({ failureThreshold: 2, openMs: 100 }, routed);
    const onA = spec({ key: 'a1:{ip:192.0.2.1}', onError: 'deny' });
    const onB = spec({ key: 'b1:{ip:192.0.2.2}', onError: 'deny', limit: 100 });
    dead.add('A');
    // Requests on both masters fail (A is down) but count against A only: B's breaker stays closed.
    const both = spec({ key: 'b2:{ip:192.0.2.3}', onError: 'local', limit: 100 });
    const onA2 = spec({ key: 'a2:{ip:192.0.2.4}', onError: 'local', limit: 100 });
    for (let i = 0; i < 10; i++) await store.consume([both, onA2]);
    for (let i = 0; i < 3; i++) await expect(store.consume([onA])).rejects.toBeInstanceOf(StoreUnavailableError);
    for (let i = 0; i < 20; i++) expect((await store.consume([onB])).allowed).toBe(true); // B is fine: no 503
    expect(store.failingNodes).toEqual(['A']);
    expect(store.circuit).toBe('open');
    clock.advance(100);
    await settle();
    expect(store.failingNodes).toEqual(['A']); // its probe pinged A only, and A is still down
    // A's replica takes over: the key now routes to a healthy master, and A's breaker is gone.
    dead.delete('A');
    promote('A', 'A2', 'A');
    expect(store.failingNodes).toEqual([]);
    expect(store.fallbackActive).toBe(false);
    // Shared again when the store has decided for A's keys, not at the promotion.
    expect(events.filter((e) => e.type === 'shared')).toEqual([]);
    expect((await store.consume([onA])).allowed).toBe(true);
    await store.consume([onA]);
    expect(events.filter((e) => e.type === 'shared')).toEqual([{ type: 'shared', from: 'A', to: 'A2', node: 'A' }]);
    expect(events.filter((e) => e.type === 'promotion')).toEqual([
      { type: 'promotion', from: 'A', to: 'A2', node: 'A', wasFailing: true },
    ]);
    expect(
      events
        .filter((e) => e.type === 'node')
        .map((e) => [(e as { node: string }).node, (e as { failing: boolean }).failing]),
    ).toEqual([
      ['A', true],
      ['A', false],
    ]);
    await store.close();
  });

  it('seeds a local bucket from what the store last reported, split by the gateways, and writes what it admitted back to the store', async () => {
    const { primary, store } = oneOfTwoGateways(new FakeClock(), 100);
    const b = spec({ limit: 20, periodMs: 3_600_000 });
    // This gateway admits 4, the other 6: the store has 10 left.
    for (let i = 0; i < 3; i++) await store.consume([b]);
    await primary.chargedElsewhere(b, 6);
    await store.consume([b]);
    primary.mode = 'fail';
    const local: boolean[] = [];
    for (let i = 0; i < 10; i++) local.push((await store.consume([b])).allowed);
    // This gateway's share of the 10 the store had left: 5 (the other gateway has the other 5).
    expect(local.filter(Boolean)).toHaveLength(5);
    primary.mode = 'ok';
    const after = await store.consume([b]);
    // The 5 admitted locally were charged to the store before its decision: 20 - 10 - 5 - 1 = 4 left.
    expect(after.buckets[0]!.remaining).toBe(4);
    // A bucket the store never reported starts from its share of the limit.
    primary.mode = 'fail';
    const fresh = spec({ limit: 6, periodMs: 3_600_000 });
    const freshLocal: boolean[] = [];
    for (let i = 0; i < 6; i++) freshLocal.push((await store.consume([fresh])).allowed);
    expect(freshLocal.filter(Boolean)).toHaveLength(3);
    await store.close();
  });

  it('counts what this gateway admitted in the window before the fault against its share', async () => {
    const { primary, store } = oneOfTwoGateways(new FakeClock(), 100);
    const b = spec({ limit: 20, periodMs: 3_600_000 });
    // This gateway alone admitted 8 of its share of 10; the store has 12 left, and the other gateway
    // may still take 6 of them (half of what it last saw): this one gets 2 more, not 6.
    for (let i = 0; i < 8; i++) expect((await store.consume([b])).allowed).toBe(true);
    primary.mode = 'fail';
    let local = 0;
    for (let i = 0; i < 10; i++) if ((await store.consume([b])).allowed) local++;
    expect(local).toBe(2);
    // One that took its whole share before the fault gets nothing more in that window.
    primary.mode = 'ok';
    const c = spec({ limit: 20, periodMs: 3_600_000 });
    for (let i = 0; i < 10; i++) await store.consume([c]);
    primary.mode = 'fail';
    expect((await store.consume([c])).allowed).toBe(false);
    await store.close();
  });

  it('gives each gateway its share of the limit in every window of an outage longer than a window', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 21, 19, 0, 0));
    const { primary, store } = oneOfTwoGateways(clock, 60_000);
    const b = spec({ limit: 10, periodMs: 1_000 });
    primary.mode = 'fail';
    for (let w = 0; w < 3; w++) {
      let admitted = 0;
      for (let i = 0; i < 20; i++) if ((await store.consume([b])).allowed) admitted++;
      expect(admitted, `window ${w}`).toBe(5);
      clock.advance(1_000);
    }
    await store.close();
  });

  it('applies the policy to peeks and resets the local count along with the shared one', async () => {
    const primary = new ScriptedPrimary();
    const { store } = setup({ failureThreshold: 100, openMs: 100 }, primary);
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
  const redis = redisFixture();

  it('costs one store timeout per call while Redis hangs, until the circuit opens; then no call reaches Redis', async () => {
    const redisStore = createRedisStore({ url: redis.url, prefix: 'hang', timeoutMs: 100 });
    await redisStore.ready();
    let reached = 0;
    const counting: Store & { ping(): Promise<void> } = {
      consume: (s) => (reached++, redisStore.consume(s)),
      peek: (s) => redisStore.peek(s),
      reset: (s) => redisStore.reset(s),
      ping: () => redisStore.ping(),
      close: () => redisStore.close(),
    };
    const clock = new FakeClock();
    const events: StoreEvent[] = [];
    const store = createResilientStore(counting, {
      fallback: new MemoryStore({ sweepIntervalMs: 0 }),
      breaker: { failureThreshold: 3, openMs: 5_000 },
      clock,
      onEvent: (e) => events.push(e),
    });
    const b = spec({ limit: 100 });
    await store.consume([b]);
    const admin = new Redis(redis.url);
    await admin.call('CLIENT', 'PAUSE', '800', 'ALL');
    for (let i = 0; i < 6; i++) expect((await store.consume([b])).allowed).toBe(true); // counted locally
    // Each of the first three ended by the store's own timeout (its bound is tested in redis.test.ts).
    expect(events.filter((e) => e.type === 'error').map((e) => (e as { reason: string }).reason)).toEqual([
      'timeout',
      'timeout',
      'timeout',
      'circuit_open',
      'circuit_open',
      'circuit_open',
    ]);
    expect(reached).toBe(1 + 3);
    await admin.call('CLIENT', 'UNPAUSE');
    admin.disconnect();
    await store.close();
  });

  it.skipIf(skipUnlessOwnRedis('a test that kills its Redis'))(
    'holds each policy while Redis is dead, opens the circuit, and recovers by itself after a restart: the charge lands in the new server',
    async () => {
      // A dead Redis refuses at once; the timeout only has to outlast a loaded machine (100 ms did not, in CI).
      const redisStore = createRedisStore({ url: redis.url, prefix: 'fault', timeoutMs: 2000 });
      await redisStore.ready();
      const events: StoreEvent[] = [];
      let recovered!: () => void;
      const back = new Promise<void>((r) => (recovered = r));
      const store = createResilientStore(redisStore, {
        fallback: new MemoryStore({ sweepIntervalMs: 0 }),
        breaker: { failureThreshold: 1, openMs: 50 },
        onEvent: (e) => {
          events.push(e);
          if (e.type === 'fallback_active' && !e.active) recovered();
        },
      });
      await redis.node.kill();
      const local = spec({ onError: 'local', limit: 2 });
      expect((await Promise.all([1, 2, 3].map(() => store.consume([local])))).map((o) => o.allowed).sort()).toEqual([
        false,
        true,
        true,
      ]);
      expect(
        (await store.consume([spec({ onError: 'allow', limit: 2 }), spec({ onError: 'allow', limit: 2 })])).buckets,
      ).toMatchObject([{ remaining: 2 }, { remaining: 2 }]);
      await expect(store.consume([spec({ onError: 'deny' })])).rejects.toBeInstanceOf(StoreUnavailableError);
      expect(store.fallbackActive).toBe(true);
      expect(store.circuit).not.toBe('closed');
      expect(events.some((e) => e.type === 'error' && e.reason === 'circuit_open')).toBe(true);
      await redis.node.restart();
      await back; // the background probe (real timers here: Redis's restart is real) closed the breaker
      expect(store.circuit).toBe('closed');
      const fresh = spec({ limit: 5 });
      expect((await store.consume([fresh])).buckets[0]!.remaining).toBe(4);
      const admin = new Redis(redis.url);
      expect((await readBucketState(admin, `fault:${fresh.key}`))?.slice(1)).toEqual([1, 0]);
      admin.disconnect();
      await store.close();
    },
  );

  it('writes back what was admitted locally up to the room left when the debt is larger (Redis reports a full bucket as 0 left)', async () => {
    const redisStore = createRedisStore({ url: redis.url, prefix: 'debt', timeoutMs: 100 });
    const other = createRedisStore({ url: redis.url, prefix: 'debt', timeoutMs: 2_000 });
    await Promise.all([redisStore.ready(), other.ready()]);
    let closed!: () => void;
    const back = new Promise<void>((r) => (closed = r));
    const store = createResilientStore(redisStore, {
      fallback: new MemoryStore({ sweepIntervalMs: 0 }),
      gateways: 2,
      breaker: { failureThreshold: 1, openMs: 50 },
      onEvent: (e) => {
        if (e.type === 'fallback_active' && !e.active) closed();
      },
    });
    const b = spec({ onError: 'local', limit: 20, periodMs: 3_600_000 });
    const admin = new Redis(redis.url);
    await admin.call('CLIENT', 'PAUSE', '3000', 'ALL');
    // This gateway's share of a bucket the store never reported: 10 of 20, counted locally.
    let local = 0;
    for (let i = 0; i < 12; i++) if ((await store.consume([b])).allowed) local++;
    expect(local).toBe(10);
    await admin.call('CLIENT', 'UNPAUSE');
    // Meanwhile the other gateway took 15 through the store: at most 5 left (4 if the call that timed out
    // landed after all), for a debt of 10.
    expect((await other.consume([{ ...b, cost: 15 }])).allowed).toBe(true);
    await back;
    // The write-back takes the 5 left: the store is full, and this request refused.
    expect((await store.consume([b])).allowed).toBe(false);
    expect((await readBucketState(admin, `debt:${b.key}`))?.[1]).toBe(20);
    admin.disconnect();
    await Promise.all([store.close(), other.close()]);
  });
});

/**
 * What the store stack built by the factory says about itself: log lines for its state changes (once
 * each, never one per request) and the limiter's metrics. Redis is real and really killed; the tests
 * wait for log lines and counts, not for time to pass.
 */
import { describe, expect, it } from 'vitest';
import { StoreError } from '../../src/limiter/errors.js';
import { createStoreFor, refundReporter, type StoreHandle } from '../../src/limiter/factory.js';
import type { StoreLog } from '../../src/limiter/types.js';
import { StoreStateLog } from '../../src/limiter/state-log.js';
import { Metrics } from '../../src/observability/metrics.js';
import { FakeClock } from '../support/clock.js';
import { skipRedis, skipUnlessOwnRedis, redisFixture } from '../support/redis.js';
import { freshBuckets } from '../support/buckets.js';

interface Line {
  level: 'warn' | 'info';
  msg: string;
  obj: Record<string, unknown>;
}

/** A logger that keeps its lines and lets a test wait for one. */
class CapturingLog implements StoreLog {
  readonly lines: Line[] = [];
  private waiters: { match: RegExp; resolve: () => void }[] = [];
  warn(obj: object, msg: string): void {
    this.add({ level: 'warn', msg, obj: obj as Record<string, unknown> });
  }
  info(obj: object, msg: string): void {
    this.add({ level: 'info', msg, obj: obj as Record<string, unknown> });
  }
  /** Resolves when a line matching `match` has been logged (at once if it already was). */
  waitFor(match: RegExp): Promise<void> {
    if (this.lines.some((l) => match.test(l.msg))) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ match, resolve }));
  }
  count(level: Line['level'], match: RegExp = /./): number {
    return this.lines.filter((l) => l.level === level && match.test(l.msg)).length;
  }
  private add(line: Line): void {
    this.lines.push(line);
    for (const w of this.waiters.filter((w) => w.match.test(line.msg))) w.resolve();
    this.waiters = this.waiters.filter((w) => !w.match.test(line.msg));
  }
}

const spec = freshBuckets((n) => `ev${n}:{ip:192.0.2.${n % 250}}`, { limit: 1_000_000 });

async function metricsText(m: Metrics): Promise<string> {
  return m.registry.metrics();
}

describe('the limiter metrics', () => {
  it('start at zero: refund failures and local rejections of both sources', async () => {
    const text = await metricsText(new Metrics({ collectDefault: false }));
    expect(text).toContain('rategate_store_refund_failures_total 0');
    expect(text).toContain('rategate_store_local_rejections_total{source="blocked_cache"} 0');
    expect(text).toContain('rategate_store_local_rejections_total{source="fallback"} 0');
    expect(text).toContain('# TYPE rategate_store_batch_requests histogram');
  });

  it('count every failed refund and log the first, then at most one line per ten seconds with the count since', () => {
    const metrics = new Metrics({ collectDefault: false });
    const log = new CapturingLog();
    const clock = new FakeClock();
    const report = refundReporter(metrics.storeObserver(), log, { store: 'redis-cluster' }, clock.now);
    const err = new StoreError('timeout', 'store refund took longer than 50 ms');
    for (let i = 0; i < 5; i++) report(err);
    clock.advance(10_000);
    report(err);
    expect(log.count('warn', /refund failed/)).toBe(2);
    expect(log.lines.map((l) => l.obj.failures)).toEqual([1, 5]);
    return metricsText(metrics).then((text) => expect(text).toContain('rategate_store_refund_failures_total 6'));
  });
});

describe('the store state log', () => {
  function setup() {
    const log = new CapturingLog();
    const clock = new FakeClock();
    const states = new StoreStateLog({
      log,
      where: { store: 'redis-cluster' },
      policy: 'onError: local',
      clock,
      holdMs: 2_000,
    });
    return { log, clock, states };
  }

  it('writes an outage of one master as one warning naming the node and its end as one line, after the hold time', () => {
    const { log, clock, states } = setup();
    states.failed('10.0.0.1:6379', 'connect ECONNREFUSED');
    states.opened('10.0.0.1:6379', undefined);
    for (let i = 0; i < 1_000; i++) states.failed('10.0.0.1:6379', 'connect ECONNREFUSED'); // the probes keep failing
    clock.advance(120_000);
    states.succeeded('10.0.0.1:6379');
    clock.advance(1_999);
    expect(log.lines).toHaveLength(1); // not yet: the node must hold
    clock.advance(1);
    expect(log.lines.map((l) => [l.level, l.msg])).toEqual([
      [
        'warn',
        'store node 10.0.0.1:6379 failing: decisions for its keys follow onError: local until it recovers or a replica is promoted',
      ],
      ['info', 'store node 10.0.0.1:6379 recovered: decisions for its keys are shared again'],
    ]);
    expect(log.lines[0]!.obj).toMatchObject({
      store: 'redis-cluster',
      node: '10.0.0.1:6379',
      err: 'connect ECONNREFUSED',
    });
  });

  it('writes nothing for failures that do not open a breaker, so an ordinary timeout neither fills the log nor hides the next outage', () => {
    const { log, clock, states } = setup();
    for (let i = 0; i < 200; i++) {
      states.failed('a:1', 'store consume took longer than 50 ms');
      clock.advance(10);
      states.succeeded('a:1');
      clock.advance(90);
    }
    clock.advance(10_000);
    expect(log.lines).toEqual([]);
    states.failed('a:1', 'connect ECONNREFUSED');
    states.opened('a:1', undefined);
    expect(log.lines.map((l) => l.msg)).toEqual([expect.stringMatching(/^store node a:1 failing/)]);
  });

  it('does not say "recovered" while a node flaps: one line when it has held for the hold time', () => {
    const { log, clock, states } = setup();
    states.failed('a:1', 'timeout');
    states.opened('a:1', undefined);
    for (let i = 0; i < 50; i++) {
      states.succeeded('a:1');
      clock.advance(500);
      states.failed('a:1', 'timeout');
      states.opened('a:1', undefined);
      clock.advance(100);
    }
    expect(log.lines).toHaveLength(1);
    states.succeeded('a:1');
    clock.advance(2_000);
    expect(log.lines.map((l) => l.level)).toEqual(['warn', 'info']);
  });

  it('says failover when a replica took over a failing master, "shared again" only when the store decided, and keeps other nodes apart', () => {
    const { log, clock, states } = setup();
    states.failed('a:1', 'timeout');
    states.opened('a:1', undefined);
    states.promoted('a:1', 'b:2', 'a:1');
    clock.advance(10_000);
    states.failed('c:3', 'connect ECONNREFUSED');
    states.opened('c:3', undefined);
    states.shared('a:1', 'b:2');
    expect(log.lines.map((l) => l.msg)).toEqual([
      expect.stringMatching(/^store node a:1 failing/),
      'store failover: b:2 promoted in place of a:1',
      expect.stringMatching(/^store node c:3 failing/),
      'store node b:2: decisions for the keys of a:1 are shared again',
    ]);
    expect(log.lines[1]!.obj).toMatchObject({ node: 'a:1', promoted: 'b:2' });
  });

  it('says when a store unreachable at start connects, once', () => {
    const { log, states } = setup();
    states.unreachableAtStart('connect ECONNREFUSED');
    states.connected();
    states.connected();
    expect(log.lines.map((l) => l.msg)).toEqual([
      'store unreachable at start: serving under onError: local until it connects',
      'store connected',
    ]);
  });
});

describe.skipIf(skipRedis('the store event tests'))('the store stack over a real Redis', () => {
  const redis = redisFixture();

  const storeConfig = () => ({ url: redis.url, prefix: 'events', timeout: 100, onError: 'local' as const });

  it('reports batch sizes and blocked-cache rejections in metrics', async () => {
    const metrics = new Metrics({ collectDefault: false });
    const handle = await createStoreFor(storeConfig(), { observer: metrics.storeObserver() });
    // Five calls in one turn go as one script call.
    await Promise.all([1, 2, 3, 4, 5].map(() => handle.store.consume([spec()])));
    const tight = spec({ limit: 1 });
    await handle.store.consume([tight]);
    expect((await handle.store.consume([tight])).allowed).toBe(false); // the store rejects it: now known blocked
    expect((await handle.store.consume([tight])).allowed).toBe(false); // rejected locally
    const text = await metricsText(metrics);
    expect(text).toMatch(/rategate_store_batch_requests_bucket\{le="4"\} 2\n/); // the two single calls after
    expect(text).toMatch(/rategate_store_batch_requests_bucket\{le="8"\} 3\n/);
    expect(text).toContain('rategate_store_batch_requests_sum 7');
    expect(text).toContain('rategate_store_local_rejections_total{source="blocked_cache"} 1');
    expect(text).toContain('rategate_store_local_rejections_total{source="fallback"} 0');
    await handle.store.close();
  });

  it.skipIf(skipUnlessOwnRedis('a test that kills its Redis'))(
    'logs Redis dying under traffic with at least one warning and at most a few, and its recovery with one line',
    async () => {
      const log = new CapturingLog();
      const metrics = new Metrics({ collectDefault: false });
      const handle: StoreHandle = await createStoreFor(storeConfig(), { log, observer: metrics.storeObserver() });
      expect(log.lines).toEqual([]);
      let served = 0;
      let running = true;
      const traffic = (async () => {
        while (running) {
          await Promise.all(
            [1, 2, 3, 4].map(() => handle.store.consume([spec({ limit: 1_000 }), spec({ onError: 'allow' })])),
          );
          served += 4;
          await new Promise((r) => setImmediate(r));
        }
      })();
      const servedPast = async (n: number): Promise<void> => {
        const target = served + n;
        while (served < target) await new Promise((r) => setImmediate(r));
      };
      await servedPast(200);
      await redis.node.kill();
      await log.waitFor(/store node .* failing/);
      await servedPast(2_000); // well past the breaker's opening: hundreds of requests on the fallback
      expect(await metricsText(metrics)).toContain('rategate_store_fallback_active 1');
      await redis.node.restart();
      await log.waitFor(/store node .* recovered/);
      await servedPast(200);
      running = false;
      await traffic;
      expect(log.count('warn')).toBeGreaterThanOrEqual(1);
      expect(log.count('warn')).toBeLessThanOrEqual(3);
      expect(log.count('info', /store node .* recovered/)).toBe(1);
      expect(log.lines.length).toBeLessThanOrEqual(4);
      const failing = log.lines.find((l) => /store node .* failing/.test(l.msg))!;
      expect(failing.msg).toContain('onError: local');
      expect(failing.obj).toMatchObject({
        store: 'redis',
        node: `127.0.0.1:${redis.node.port}`,
        err: expect.any(String),
      });
      expect(await metricsText(metrics)).toContain('rategate_store_fallback_active 0');
      await handle.store.close();
    },
  );

  it.skipIf(skipUnlessOwnRedis('a test that kills its Redis'))(
    'warns at start when Redis is unreachable, serves under the fault policy, and says once when it connects',
    async () => {
      await redis.node.kill();
      const log = new CapturingLog();
      const handle = await createStoreFor(storeConfig(), { log, connectWaitMs: 300 });
      // The warning is there by the time start-up goes on (after connectWaitMs, 3 s by default).
      expect(log.count('warn', /store unreachable at start/)).toBe(1);
      expect(log.lines[0]!.msg).toContain('onError: local');
      expect(await handle.reachable()).toBe(false); // down, and still serving under the local fallback
      await redis.node.restart();
      await log.waitFor(/store connected/);
      expect((await handle.store.consume([spec()])).allowed).toBe(true);
      expect(log.lines.map((l) => l.level)).toEqual(['warn', 'info']);
      await handle.store.close();
    },
  );
});

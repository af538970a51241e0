/**
 * What the store stack built by the factory says about itself: log lines for its state changes (once
 * each, never one per request) and the limiter's metrics. Redis is real and really killed; the tests
 * wait for log lines and counts, not for time to pass.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreError } from '../../src/limiter/errors.js';
import { createStoreFor, refundReporter, type StoreHandle } from '../../src/limiter/factory.js';
import type { BucketSpec, StoreLog } from '../../src/limiter/types.js';
import { StoreStateLog } from '../../src/limiter/state-log.js';
import { Metrics } from '../../src/observability/metrics.js';
import { FakeClock } from '../support/clock.js';
import { skipRedis, startRedis, type RedisHandle } from '../support/redis.js';

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

let seq = 0;
function spec(over: Partial<BucketSpec> = {}): BucketSpec {
  return { key: `ev${++seq}:{ip:192.0.2.${seq % 250}}`, limit: 1_000_000, periodMs: 60_000, algorithm: 'fixed-window', cost: 1, shadow: false, onError: 'local', ...over };
}

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
    const states = new StoreStateLog({ log, where: { store: 'redis' }, policy: 'onError: local', clock, quietMs: 30_000 });
    return { log, clock, states };
  }

  it('writes an outage as one warning and its end as one line, however long it lasts', () => {
    const { log, clock, states } = setup();
    states.failed('connect ECONNREFUSED');
    for (let i = 0; i < 1_000; i++) states.failed('connect ECONNREFUSED'); // the probes keep failing
    clock.advance(120_000);
    states.recovered();
    expect(log.lines.map((l) => [l.level, l.msg])).toEqual([
      ['warn', 'store failing: decisions follow onError: local until it recovers'],
      ['info', 'store recovered: decisions are shared again'],
    ]);
    expect(log.lines[0]!.obj).toMatchObject({ store: 'redis', err: 'connect ECONNREFUSED' });
  });

  it('writes a flapping store as a few lines per quiet period, not a pair per hiccup, and always ends on the truth', () => {
    const { log, clock, states } = setup();
    for (let i = 0; i < 200; i++) {
      states.failed('store consume took longer than 50 ms');
      clock.advance(10);
      states.recovered();
      clock.advance(90); // 200 hiccups over 20 s
    }
    expect(log.lines.map((l) => l.level)).toEqual(['warn', 'info']);
    clock.advance(10_000); // the quiet period ends: one line sums it up
    expect(log.lines).toHaveLength(3);
    expect(log.lines[2]!).toMatchObject({ level: 'warn', obj: { failuresSinceLastLine: 199 } });
    expect(log.lines[2]!.msg).toMatch(/store flapping: it failed and recovered 199 times in 30 s/);
    // A hiccup that turns into an outage inside a quiet period is written when the period ends.
    states.failed('connect ECONNREFUSED');
    expect(log.lines).toHaveLength(3);
    clock.advance(30_000);
    expect(log.lines).toHaveLength(4);
    expect(log.lines[3]!.msg).toMatch(/store failing/);
    states.recovered();
    expect(log.lines[4]!.msg).toMatch(/store recovered/);
  });

  it('counts a store unreachable at start as the failure, so the first request adds no line, and says when it connects', () => {
    const { log, states } = setup();
    states.unreachableAtStart('connect ECONNREFUSED');
    states.failed('connect ECONNREFUSED');
    states.recovered('store connected');
    expect(log.lines.map((l) => l.msg)).toEqual([
      'store unreachable at start: serving under onError: local until it connects',
      'store connected',
    ]);
  });
});

describe.skipIf(skipRedis('the store event tests'))('the store stack over a real Redis', () => {
  let redis: RedisHandle;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => redis?.stop());

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

  it('logs Redis dying under traffic with at least one warning and at most a few, and its recovery with one line', async () => {
    if (redis.source === 'env') return; // cannot kill an external Redis
    const log = new CapturingLog();
    const metrics = new Metrics({ collectDefault: false });
    const handle: StoreHandle = await createStoreFor(storeConfig(), { log, observer: metrics.storeObserver() });
    expect(log.lines).toEqual([]);
    let served = 0;
    let running = true;
    const traffic = (async () => {
      while (running) {
        await Promise.all([1, 2, 3, 4].map(() => handle.store.consume([spec({ limit: 1_000 }), spec({ onError: 'allow' })])));
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
    await log.waitFor(/store failing/);
    await servedPast(2_000); // well past the breaker's opening: hundreds of requests on the fallback
    expect(await metricsText(metrics)).toContain('rategate_store_fallback_active 1');
    await redis.node.restart();
    await log.waitFor(/store recovered/);
    await servedPast(200);
    running = false;
    await traffic;
    expect(log.count('warn')).toBeGreaterThanOrEqual(1);
    expect(log.count('warn')).toBeLessThanOrEqual(3);
    expect(log.count('info', /store recovered/)).toBe(1);
    expect(log.lines.length).toBeLessThanOrEqual(4);
    const failing = log.lines.find((l) => /store failing/.test(l.msg))!;
    expect(failing.msg).toContain('onError: local');
    expect(failing.obj).toMatchObject({ store: 'redis', err: expect.any(String) });
    expect(await metricsText(metrics)).toContain('rategate_store_fallback_active 0');
    await handle.store.close();
  });

  it('warns at start when Redis is unreachable, serves under the fault policy, and says once when it connects', async () => {
    if (redis.source === 'env') return;
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
  });
});

/**
 * `scope: store` in-flight limits on a real Redis: two gateways share the slots of one key, and a
 * lease a dead replica never released frees itself when it runs out.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import {
  skipCluster,
  skipRedis,
  startRedis,
  startRedisCluster,
  type ClusterHandle,
  type RedisHandle,
} from '../support/redis.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { RedisGuardState } from '../../src/guard/redis-state.js';
import { eventually } from '../support/eventually.js';
import { scaledMs } from '../support/speed.js';

describe.skipIf(skipRedis('store-scope in-flight limits'))('scope: store', () => {
  let redis: RedisHandle;
  let upstream: RecordingUpstream;
  const held: http.ServerResponse[] = [];
  let gws: TestGateway[] = [];
  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    upstream.route('/api/v2/media', (req, res) => {
      req.resume();
      held.push(res);
    });
    const table = `concurrency:
  - { name: uploads, match: POST /api/v2/media, per: ip, max: 2, scope: store }
store: { timeout: 2s }
`;
    gws = [
      await startTestGateway(table, { upstream: upstream.url, store: redis.url }),
      await startTestGateway(table, { upstream: upstream.url, store: redis.url }),
    ];
  });
  afterAll(async () => {
    for (const r of held) r.destroy();
    await Promise.all(gws.map((g) => g.shutdown(100)));
    await upstream?.close();
    await redis?.stop();
  });

  it('two gateways share max 2: of 5 parallel uploads spread over both, 2 are forwarded and 3 refused', async () => {
    const post = (i: number) =>
      fetch(`${gws[i % 2]!.url}/api/v2/media`, {
        method: 'POST',
        headers: { 'x-forwarded-for': '203.0.113.30' },
        body: 'x',
      }).then(async (r) => {
        await r.arrayBuffer();
        return { status: r.status, retryAfter: r.headers.get('retry-after') };
      });
    const answers = Array.from({ length: 5 }, (_, i) => post(i));
    const settled: { status: number; retryAfter: string | null }[] = [];
    for (const a of answers) void a.then((r) => settled.push(r));
    await eventually(() => ({ held: held.length, settled: settled.length }), {
      what: 'two held upstream and three answered',
      withinMs: 10_000,
      until: (n) => n.held >= 2 && n.settled >= 3,
    });
    expect(held).toHaveLength(2);
    expect(settled).toEqual([0, 1, 2].map(() => ({ status: 429, retryAfter: '1' })));
    for (const r of held.splice(0)) r.end('{}');
    expect((await Promise.all(answers)).filter((r) => r.status === 200)).toHaveLength(2);
    // Released: both slots free again.
    const again = [post(0), post(1)];
    await eventually(() => held.length >= 2, { what: 'both held upstream again' });
    for (const r of held.splice(0)) r.end('{}');
    expect((await Promise.all(again)).map((r) => r.status)).toEqual([200, 200]);
  });

  it('a lease never released (its replica died) expires by itself', async () => {
    let t = 1_000_000;
    const state = new RedisGuardState({ url: redis.url, prefix: 'lease-test', timeoutMs: 2_000, now: () => t });
    try {
      await state.ready(5_000);
      const a = await state.acquire('k:{ip:x}', 1, 500);
      expect(a).not.toBeNull();
      expect(await state.acquire('k:{ip:x}', 1, 500)).toBeNull();
      t += 501; // the holder is gone and renews nothing
      expect(await state.acquire('k:{ip:x}', 1, 500)).not.toBeNull();
    } finally {
      await state.close();
    }
  });
});

describe.skipIf(skipCluster('guard state on a Redis Cluster'))('guard state on a Redis Cluster', () => {
  let cluster: ClusterHandle;
  beforeAll(async () => {
    cluster = await startRedisCluster();
  }, scaledMs(60_000));
  afterAll(async () => cluster?.stop());

  it(
    'stores entries, starts bans and leases slots on a cluster (the entries share one hash slot), and each replica follows the change log',
    async () => {
      const a = new RedisGuardState({ url: cluster.url, prefix: 'rg', timeoutMs: 2_000 });
      const b = new RedisGuardState({ url: cluster.url, prefix: 'rg', timeoutMs: 2_000, pollMs: 50 });
      try {
        await Promise.all([a.ready(10_000), b.ready(10_000)]);
        await Promise.all([a.sync(), b.sync()]);
        b.follow(true);
        await a.put({
          kind: 'block',
          id: '203.0.113.0/24',
          reason: 'r',
          createdAt: Date.now(),
          expiresAt: Date.now() + 60_000,
        });
        const c = {
          id: 'login/ip:198.51.100.1',
          limit: 2,
          periodMs: 60_000,
          banMs: 60_000,
          reason: 'x',
          maxActive: 10,
        };
        expect(await a.countBan(c, Date.now())).toBeNull();
        expect(await b.countBan(c, Date.now())).toMatchObject({ entry: { kind: 'ban', id: c.id }, dropped: [] });
        const ids = (s: RedisGuardState) =>
          s.view
            .live(Date.now())
            .map((e) => `${e.kind}|${e.id}`)
            .sort();
        // `b` started the ban itself; the block it learns from the log (its next poll, 50 ms).
        await eventually(() => ids(b), { what: 'b holding both entries', until: (l) => l.length >= 2 });
        expect(ids(b)).toEqual(['ban|login/ip:198.51.100.1', 'block|203.0.113.0/24']);
        // `a` learns the ban from the log (announced, or polled since it holds an entry).
        await eventually(() => ids(a), { what: 'a holding both entries', until: (l) => l.length >= 2 });
        expect(ids(a)).toEqual(['ban|login/ip:198.51.100.1', 'block|203.0.113.0/24']);
        const lease = await a.acquire('uploads:{acct:a:1}', 1, 10_000);
        expect(lease).not.toBeNull();
        expect(await b.acquire('uploads:{acct:a:1}', 1, 10_000)).toBeNull();
        await a.release('uploads:{acct:a:1}', lease!);
        expect(await b.acquire('uploads:{acct:a:1}', 1, 10_000)).not.toBeNull();
        expect(await a.remove('block', '203.0.113.0/24')).toMatchObject({ kind: 'block', id: '203.0.113.0/24' });
        await eventually(() => ids(b), { what: 'the removal on b', until: (l) => l.length <= 1 });
        expect(ids(b)).toEqual(['ban|login/ip:198.51.100.1']);
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    },
    scaledMs(30_000),
  );
});

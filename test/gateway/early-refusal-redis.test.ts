/**
 * The early refusal on Redis (issue 37): a flood with a fresh token each time, refused by a bucket that
 * needs no account, is refused before any introspection; once a read has shown that bucket full, the
 * blocked cache knows it, and the rest of the flood costs Redis no script call (it cost one
 * read per request: 20 for these 20). A gateway that meets the flood fresh (a restart, a new replica:
 * it never consumed, so it had no store time to map a block to) learns it from its first read too:
 * the reads carry Redis's clock (it cost two reads per request, forever).
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, gatewayFixture } from '../support/gateway.js';
import { VERIFY } from '../support/recording-upstream.js';
import { scriptCalls, skipRedis, startRedis, type RedisHandle } from '../support/redis.js';
import { scaledMs } from '../support/speed.js';

const fx = gatewayFixture({ graceMs: 200 });
const TABLE = (prefix: string): string => `store: { prefix: "${prefix}" }
limits:
  - { name: by-ip, match: /api/*, per: ip, limit: 2, period: 5m }
  - { name: account-access, match: /api/*, per: account, limit: 300, period: 5m }
`;
const noRedis = skipRedis('the early refusal on Redis');
let redis: RedisHandle | undefined;
let admin: Redis | undefined;

beforeAll(async () => {
  if (noRedis) return;
  redis = await startRedis();
  admin = new Redis(redis.url);
}, scaledMs(60_000));
afterAll(async () => {
  admin?.disconnect();
  await redis?.stop();
});

describe.skipIf(noRedis)('a flood with fresh tokens on Redis', () => {
  it('is refused without introspection, and after the first read without a script call', async () => {
    fx.gw = await startTestGateway(TABLE(`early${process.pid}`), { upstream: fx.upstream.url, store: redis!.url });
    const introspections = () => fx.upstream.seen.filter((s) => s.url === VERIFY).length;
    const get = (i: number) =>
      fetch(`${fx.gw!.url}/api/v1/timelines/home`, { headers: { Authorization: `Bearer user-${i}` } });
    for (let i = 0; i < 2; i++) expect((await get(i)).status).toBe(200);
    const asked = introspections();
    // The first refusal reads the buckets from Redis and teaches the cache the full one.
    expect((await get(100)).status).toBe(429);
    const before = await scriptCalls(admin!);
    for (let i = 101; i < 121; i++) {
      const res = await get(i);
      expect(res.status).toBe(429);
      expect(res.headers.get('x-ratelimit-limit')).toBe('2');
      expect(res.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    }
    // (A fleet heartbeat may fall in the window: one script call.)
    expect((await scriptCalls(admin!)) - before).toBeLessThanOrEqual(1);
    expect(introspections()).toBe(asked);
    // The process answers as before.
    expect(
      (await fetch(`${fx.gw.url}/api/v1/timelines/home`, { headers: { 'X-Forwarded-For': '203.0.113.1' } })).status,
    ).toBeLessThan(500);
  });

  it('is learnt by a gateway that meets it fresh, from its first read, and costs Redis no script call after it', async () => {
    const prefix = `fresh${process.pid}`;
    const first = await startTestGateway(TABLE(prefix), { upstream: fx.upstream.url, store: redis!.url });
    const get = (url: string, i: number) =>
      fetch(`${url}/api/v1/timelines/home`, { headers: { Authorization: `Bearer user-${i}` } });
    try {
      for (let i = 0; i < 2; i++) expect((await get(first.url, i)).status).toBe(200);
      expect((await get(first.url, 2)).status).toBe(429);
    } finally {
      await first.shutdown(200);
    }
    // A second gateway on the same store: the client's bucket is full before its first request.
    fx.gw = await startTestGateway(TABLE(prefix), { upstream: fx.upstream.url, store: redis!.url });
    const introspections = () => fx.upstream.seen.filter((s) => s.url === VERIFY).length;
    const asked = introspections();
    const before = await scriptCalls(admin!);
    for (let i = 100; i < 140; i++) {
      const res = await get(fx.gw.url, i);
      expect(res.status).toBe(429);
      expect(res.headers.get('x-ratelimit-remaining')).toBe('0');
    }
    // The first read (one peek per bucket that needs no account) and a fleet heartbeat at most.
    expect((await scriptCalls(admin!)) - before).toBeLessThanOrEqual(2);
    expect(introspections()).toBe(asked);
    expect((await get(fx.gw.url, 200)).status).toBe(429);
  });
});

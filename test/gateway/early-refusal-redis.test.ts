/**
 * The early refusal on Redis (issue 37): a flood with a fresh token each time, refused by a bucket that
 * needs no account, is refused before any introspection; once a read has shown that bucket full, the
 * blocked cache knows it, and the rest of the flood costs Redis no script call (it cost one
 * read per request: 20 for these 20).
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, gatewayFixture } from '../support/gateway.js';
import { VERIFY } from '../support/recording-upstream.js';
import { skipRedis, startRedis, type RedisHandle } from '../support/redis.js';
import { scaledMs } from '../support/speed.js';

const fx = gatewayFixture({ graceMs: 200 });
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

async function scriptCalls(): Promise<number> {
  const info = await admin!.info('commandstats');
  let n = 0;
  for (const m of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) n += Number(m[1]);
  return n;
}

describe.skipIf(noRedis)('a flood with fresh tokens on Redis', () => {
  it('is refused without introspection, and after the first read without a script call', async () => {
    fx.gw = await startTestGateway(
      `store: { prefix: "early${process.pid}" }
limits:
  - { name: by-ip, match: /api/*, per: ip, limit: 2, period: 5m }
  - { name: account-access, match: /api/*, per: account, limit: 300, period: 5m }
`,
      { upstream: fx.upstream.url, store: redis!.url },
    );
    const introspections = () => fx.upstream.seen.filter((s) => s.url === VERIFY).length;
    const get = (i: number) =>
      fetch(`${fx.gw!.url}/api/v1/timelines/home`, { headers: { Authorization: `Bearer user-${i}` } });
    for (let i = 0; i < 2; i++) expect((await get(i)).status).toBe(200);
    const asked = introspections();
    // The first refusal reads the buckets from Redis and teaches the cache the full one.
    expect((await get(100)).status).toBe(429);
    const before = await scriptCalls();
    for (let i = 101; i < 121; i++) {
      const res = await get(i);
      expect(res.status).toBe(429);
      expect(res.headers.get('x-ratelimit-limit')).toBe('2');
      expect(res.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    }
    // (A fleet heartbeat may fall in the window: one script call.)
    expect((await scriptCalls()) - before).toBeLessThanOrEqual(1);
    expect(introspections()).toBe(asked);
    // The process answers as before.
    expect(
      (await fetch(`${fx.gw.url}/api/v1/timelines/home`, { headers: { 'X-Forwarded-For': '203.0.113.1' } })).status,
    ).toBeLessThan(500);
  });
});

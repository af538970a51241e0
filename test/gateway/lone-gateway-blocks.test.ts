/**
 * A lone gateway on Redis (leases on, the default) re-checks no block (issue 37): once its fleet counts
 * only itself, nobody else holds a lease that could come back, so a flood from many slow clients, each
 * blocked, costs Redis no script call. It cost one per blocked client per 1.25 s (the re-check period):
 * every request of a client slower than that.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, gatewayFixture } from '../support/gateway.js';
import { eventually } from '../support/eventually.js';
import { scriptCalls, skipRedis, startRedis, type RedisHandle } from '../support/redis.js';
import { scaledMs } from '../support/speed.js';

const fx = gatewayFixture({ graceMs: 200 });
const noRedis = skipRedis('a lone gateway on Redis');
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

const CLIENTS = 40;
const ip = (i: number): string => `203.0.113.${i + 1}`;

describe.skipIf(noRedis)('a lone gateway, its clients blocked', () => {
  it(
    'answers slow clients from its blocked cache, without a re-check, once its fleet counts one',
    async () => {
      fx.gw = await startTestGateway(
        `store: { prefix: "lone${process.pid}" }
limits:
  - { name: by-ip, match: /api/*, per: ip, limit: 1, period: 1h }
`,
        { upstream: fx.upstream.url, store: redis!.url },
      );
      const gw = fx.gw;
      const get = (i: number) =>
        fetch(`${gw.url}/api/v1/timelines/public`, { headers: { 'X-Forwarded-For': ip(i) } }).then((r) => r.status);
      for (let i = 0; i < CLIENTS; i++) expect([await get(i), await get(i)]).toEqual([200, 429]);
      // store.gateways (2) holds for one heartbeat period; then the fleet counts this gateway alone.
      await eventually(
        async () => /^rategate_gateways 1$/m.test(await (await fetch(`${gw.adminUrl}/metrics`)).text()),
        { withinMs: 15_000, what: 'rategate_gateways 1' },
      );
      const before = await scriptCalls(admin!);
      // Three rounds, each after the re-check period (1.25 s): every request would have been a re-check.
      for (let round = 0; round < 3; round++) {
        await new Promise((r) => setTimeout(r, 1_400));
        for (let i = 0; i < CLIENTS; i++) expect(await get(i)).toBe(429);
      }
      // Heartbeats only (one per period, and the fleet's reads): not one per client per round (120).
      expect((await scriptCalls(admin!)) - before).toBeLessThanOrEqual(6);
      expect(await get(CLIENTS + 1)).toBe(200);
    },
    scaledMs(40_000),
  );
});

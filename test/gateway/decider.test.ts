/**
 * The access line names who decided (store, lease, cache, fallback, memory), and store trouble below an
 * outage is in the log as rate-limited warnings with counts: the log explains every limiter metric.
 * A real gateway on loopback; a real Redis, really killed.
 */
import { describe, expect, it } from 'vitest';
import { capturingLogger, gatewayFixture, startTestGateway, type LogLine } from '../support/gateway.js';
import { skipIfExternalRedis, skipRedis, redisFixture } from '../support/redis.js';
import { eventually } from '../support/eventually.js';

const fx = gatewayFixture({ graceMs: 200 });

const TABLE = `limits:
  - { name: narrow, match: POST /api/v1/statuses, per: ip, limit: 2, period: 1h }
  - { name: wide, match: /api/*, per: ip, limit: 1000, period: 1h }
store: { onError: local }
`;

const accessLines = (lines: LogLine[]): LogLine[] => lines.filter((l) => l.msg === 'request');

async function post(url: string, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await fetch(`${url}/api/v1/statuses`, { method: 'POST' })).status);
  return out;
}

describe('the decider in the access line', () => {
  it('is memory for the memory store, on an admission and on a 429', async () => {
    const { logger, lines } = capturingLogger();
    fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url, logger });
    expect(await post(fx.gw.url, 3)).toEqual([200, 200, 429]);
    expect(accessLines(lines).map((l) => [l.decision, l.decider])).toEqual([
      ['allowed', 'memory'],
      ['allowed', 'memory'],
      ['limited', 'memory'],
    ]);
    // A request no rule counts had no decider.
    await fetch(`${fx.gw.url}/about`);
    expect(accessLines(lines).at(-1)).not.toHaveProperty('decider');
  });
});

describe.skipIf(skipRedis('the decider over Redis'))('the decider over Redis', () => {
  const redis = redisFixture();

  it.skipIf(skipIfExternalRedis('the decider with Redis killed'))(
    'is store for the first answers, cache for a refusal the store gave before, fallback while Redis is dead, with counted warnings',
    async () => {
      const { logger, lines } = capturingLogger();
      fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url, logger, store: redis.url });
      expect(await post(fx.gw.url, 4)).toEqual([200, 200, 429, 429]);
      const before = accessLines(lines).map((l) => [l.decision, l.decider]);
      expect(before[0]).toEqual(['allowed', 'store']);
      expect(before[2]).toEqual(['limited', 'store']);
      expect(before[3]).toEqual(['limited', 'cache']);

      await redis.node.kill();
      try {
        // Another client: the first one's `wide` bucket holds a lease, spendable while the store fails.
        const other = { headers: { 'x-forwarded-for': '203.0.113.9' } };
        for (let i = 0; i < 6; i++) expect((await fetch(`${fx.gw.url}/api/v1/timelines/home`, other)).status).toBe(200);
        const during = accessLines(lines).slice(4);
        expect(during.every((l) => l.decision === 'allowed' && l.decider === 'fallback')).toBe(true);
        // The first trouble is written at once, with what it counted; the rest waits for the interval.
        await eventually(() => lines.some((l) => /^store node .*decisions? by the fault policy/.test(l.msg)), {
          what: 'the fault-policy decisions logged',
          withinMs: 10_000,
          everyMs: 25,
        });
        const warn = lines.find((l) => /^store node .*: /.test(l.msg) && l.fallback !== undefined)!;
        expect(warn.level).toBe('warn');
        expect(warn).toMatchObject({ store: 'redis', node: `127.0.0.1:${redis.node.port}`, intervalMs: 10_000 });
        const warned = lines.filter((l) => l.fallback !== undefined);
        expect(warned.length).toBeLessThanOrEqual(2); // one at once, at most one for the interval (a slow run)
        // Alive and answering after all of it.
        expect((await fetch(`${fx.gw.url}/api/v1/timelines/home`)).status).toBe(200);
      } finally {
        await redis.node.restart();
      }
    },
  );
});

/**
 * A Redis whose connections are cut again and again just after they open (a flapping network, a
 * restarting balancer): ioredis's own resubscription on such a connection fails with a promise nobody
 * catches, and an unhandled rejection ends a Node process. The shared guard state's subscriber must
 * not leave one; a real gateway must live through it and answer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisGuardState } from '../../src/guard/redis-state.js';
import { eventually } from '../support/eventually.js';
import { startFlappingProxy, type FlappingProxy } from '../support/flapping-proxy.js';
import { spawnServe, stop } from '../support/process.js';
import { limitsFile, upstreamFixture } from '../support/gateway.js';
import { skipRedis, startRedis, type RedisHandle } from '../support/redis.js';
import { scaledMs } from '../support/speed.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(skipRedis('a flapping Redis connection'))('a Redis connection cut again and again', () => {
  let redis: RedisHandle;
  let proxy: FlappingProxy;
  const upstream = upstreamFixture();
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it(
    'leaves no unhandled rejection from the guard state, which works again once the network calms',
    async () => {
      proxy = await startFlappingProxy({ host: '127.0.0.1', port: redis.node.port });
      const rejections: unknown[] = [];
      const onRejection = (reason: unknown): void => void rejections.push(reason);
      process.on('unhandledRejection', onRejection);
      // Twenty states: on the code before the fix, 7 of these rejections came in 15 s from ten.
      const states = Array.from(
        { length: 20 },
        () => new RedisGuardState({ url: `redis://127.0.0.1:${proxy.port}`, prefix: 'flap:', timeoutMs: 250 }),
      );
      try {
        await sleep(6_000);
        expect(proxy.cuts()).toBeGreaterThan(200);
        proxy.calm();
        await eventually(
          async () => {
            await states[0]!.put({
              kind: 'block',
              id: '203.0.113.7',
              reason: 'r',
              createdAt: 1,
              expiresAt: null,
              who: 't',
            });
            return states[1]!.view.blocks.contains('203.0.113.7');
          },
          { what: 'a block put by one state seen by another', withinMs: 10_000 },
        );
        expect(rejections.map((r) => String(r))).toEqual([]);
      } finally {
        process.off('unhandledRejection', onRejection);
        for (const s of states) await s.close();
        await proxy.close();
      }
    },
    scaledMs(60_000),
  );

  it(
    'a gateway on it stays alive and answers',
    async () => {
      proxy = await startFlappingProxy({ host: '127.0.0.1', port: redis.node.port });
      const limits = limitsFile(`limits:
  - { name: all, match: /api/*, per: ip, limit: 1000, period: 1m }
store: { timeout: 100ms }
`);
      const gw = await spawnServe([
        '--config',
        limits,
        '--upstream',
        upstream.url,
        '--store',
        `redis://127.0.0.1:${proxy.port}`,
      ]);
      try {
        for (let i = 0; i < 30; i++) {
          await fetch(`${gw.url}/api/v1/statuses/1`).catch(() => null);
          await sleep(200);
        }
        expect(proxy.cuts()).toBeGreaterThan(50);
        expect(gw.child.exitCode).toBeNull();
        proxy.calm();
        const res = await fetch(`${gw.url}/api/v1/statuses/1`);
        expect([200, 404]).toContain(res.status);
      } finally {
        await stop(gw);
        await proxy.close();
      }
    },
    scaledMs(60_000),
  );
});

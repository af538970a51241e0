/**
 * @module Store backends by URL scheme: every scheme the parser accepts has a backend and the same
 * reading under its `valkey` alias; and the Valkey alias against a real server. Debian 12 packages no
 * valkey-server (`apt-cache policy valkey-server` is empty), so the alias runs against redis-server:
 * the Redis store contract, leases and Lua included, and the guard state shared through it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseStoreUrl, redactStoreUrl, storeScheme } from '../../src/config/store-url.js';
import { backendFor, STORE_BACKENDS } from '../../src/limiter/backends/index.js';
import { createStoreFor } from '../../src/limiter/factory.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { skipRedis, startRedis, type RedisHandle } from '../support/redis.js';
import { startTestGateway } from '../support/gateway.js';
import { storeContract, throughConsumeLocal } from './store.contract.js';

/** One URL per scheme family, written with `redis`. */
const SAMPLES = [
  'redis://cache:6380/2',
  'rediss://u:p@cache',
  'redis+unix://u:p@/run/redis.sock',
  'redis-cluster://a:7000,b:7001',
  'rediss-cluster://a:7000',
  'redis-sentinel://s1,s2:26380/mymaster/1',
  'rediss-sentinel://s1/mymaster',
];

describe('store backends by URL scheme', () => {
  it('have a backend for every scheme the parser accepts, and the parser accepts every scheme they open', () => {
    const all = ['memory', ...SAMPLES, ...SAMPLES.map((u) => u.replace(/^redis/, 'valkey'))];
    for (const url of all) expect(backendFor(url).schemes, url).toContain(storeScheme(url));
    for (const scheme of STORE_BACKENDS.keys()) {
      const url = all.find((u) => storeScheme(u) === scheme);
      expect(url, scheme).toBeDefined();
      expect(() => parseStoreUrl(url!), scheme).not.toThrow();
    }
    expect(() => parseStoreUrl('keydb://cache')).toThrow(/unknown scheme/);
  });

  it('reads a valkey… URL exactly as the redis… one', () => {
    for (const url of SAMPLES) expect(parseStoreUrl(url.replace(/^redis/, 'valkey')), url).toEqual(parseStoreUrl(url));
  });

  it('says what each backend can do: memory is this process only; the Redis protocol is shared, guard state included', () => {
    expect(backendFor('memory').can).toEqual({ shared: false, redisProtocol: false });
    for (const url of SAMPLES) expect(backendFor(url).can, url).toEqual({ shared: true, redisProtocol: true });
  });

  it('hides the password of every scheme in logs, the Unix-socket and Valkey ones included', () => {
    expect(redactStoreUrl('redis+unix://gate:s3cret@/run/redis.sock')).toBe('redis+unix://gate:***@/run/redis.sock');
    expect(redactStoreUrl('valkey+unix://:s3cret@/run/valkey.sock')).toBe('valkey+unix://:***@/run/valkey.sock');
    expect(redactStoreUrl('valkeys-sentinel://gate:s3cret@s1/mymaster')).toBe(
      'valkeys-sentinel://gate:***@s1/mymaster',
    );
  });
});

describe.skipIf(skipRedis('the valkey:// alias against a real server'))(
  'valkey:// against redis-server (no valkey-server in Debian 12)',
  () => {
    let redis: RedisHandle;
    let upstream: RecordingUpstream;
    const valkeyUrl = (): string => redis.url.replace(/^redis:/, 'valkey:');
    beforeAll(async () => {
      redis = await startRedis();
      upstream = await startRecordingUpstream();
    });
    afterAll(async () => {
      await upstream?.close();
      await redis?.stop();
    });

    storeContract('valkey:// as the factory composes it (leases on)', async (clock) => {
      const handle = await createStoreFor(
        { url: valkeyUrl(), prefix: 'vkdeco', timeout: 2_000, onError: 'deny' },
        { now: clock.now },
      );
      expect(handle.kind).toBe('redis');
      expect(handle.leases).toBeDefined();
      return handle.store;
    });
    storeContract('valkey:// decided through consumeLocal', async (clock) => {
      const handle = await createStoreFor(
        { url: valkeyUrl(), prefix: 'vklocal', timeout: 2_000, onError: 'deny' },
        { now: clock.now },
      );
      return throughConsumeLocal(handle.store);
    });

    it('shares the guard state between two gateways: a block made on one applies on the other', async () => {
      const table = 'limits:\n  - { name: any, match: /*, per: ip, limit: 1000, period: 1m }\n';
      const a = await startTestGateway(table, { upstream: upstream.url, store: valkeyUrl() });
      const b = await startTestGateway(table, { upstream: upstream.url, store: valkeyUrl() });
      try {
        expect(a.guard.state.scope).toBe('shared');
        await a.guard.state.put({
          kind: 'block',
          id: '203.0.113.77',
          reason: 'valkey alias',
          createdAt: Date.now(),
          expiresAt: Date.now() + 60_000,
        });
        await b.guard.sync();
        const r = await fetch(`${b.url}/x`, { headers: { 'x-forwarded-for': '203.0.113.77' } });
        expect(r.status).toBe(403);
      } finally {
        await Promise.all([a.shutdown(0), b.shutdown(0)]);
      }
    });
  },
);

/**
 * `redis+unix://` store URLs: parsed by the one store-URL parser, and a real redis-server on a Unix
 * socket counts for the gateway's store stack (leases on and off) exactly as over TCP.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseStoreUrl, StoreUrlError } from '../../src/config/store-url.js';
import { createStoreFor } from '../../src/limiter/factory.js';
import type { BucketSpec } from '../../src/limiter/types.js';
import { skipRedis, startRedis, type RedisHandle } from '../support/redis.js';

describe('redis+unix:// URLs', () => {
  it('take an absolute socket path, with optional credentials', () => {
    expect(parseStoreUrl('redis+unix:///run/redis/redis.sock')).toEqual({
      kind: 'redis',
      tls: false,
      socket: '/run/redis/redis.sock',
      db: 0,
    });
    expect(parseStoreUrl('redis+unix://app:s%3Acret@/tmp/r.sock')).toEqual({
      kind: 'redis',
      tls: false,
      username: 'app',
      password: 's:cret',
      socket: '/tmp/r.sock',
      db: 0,
    });
  });

  it('refuse a relative or empty path, a directory, .. segments and a query', () => {
    for (const bad of [
      'redis+unix://',
      'redis+unix://redis.sock',
      'redis+unix:///',
      'redis+unix:///run/',
      'redis+unix:///run/../etc/r.sock',
      'redis+unix:///r.sock?db=2',
    ]) {
      expect(() => parseStoreUrl(bad), bad).toThrow(StoreUrlError);
    }
  });
});

describe.skipIf(skipRedis('the Unix socket store test'))('a Redis on a Unix socket', () => {
  let redis: RedisHandle;
  let dir: string;
  let socket: string;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-sock-'));
    socket = path.join(dir, 'redis.sock');
    redis = await startRedis(['--unixsocket', socket, '--unixsocketperm', '700']);
  });
  afterAll(async () => {
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  for (const lease of [true, false]) {
    it(`counts exactly through the socket (leases ${lease ? 'on' : 'off'}), and the TCP side sees the same count`, async () => {
      const spec: BucketSpec = {
        key: `unix-${lease}:{ip:203.0.113.9}`,
        limit: 25,
        periodMs: 60_000,
        algorithm: 'fixed-window',
        cost: 1,
        shadow: false,
        onError: 'deny',
      };
      const viaSocket = await createStoreFor({
        url: `redis+unix://${socket}`,
        prefix: 'ux',
        timeout: 2_000,
        onError: 'deny',
        lease,
      });
      const viaTcp = await createStoreFor({
        url: redis.url,
        prefix: 'ux',
        timeout: 2_000,
        onError: 'deny',
        lease: false,
      });
      try {
        expect(await viaSocket.reachable()).toBe(true);
        let admitted = 0;
        for (let i = 0; i < 40; i++) if ((await viaSocket.store.consume([spec])).allowed) admitted++;
        expect(admitted).toBe(25);
        expect((await viaTcp.store.peek(spec)).remaining).toBe(0);
      } finally {
        await viaSocket.store.close();
        await viaTcp.store.close();
      }
    });
  }
});

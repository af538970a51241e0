/** Credentials and the database number of a store URL reach Redis (single node and cluster). */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreError } from '../../src/limiter/errors.js';
import { createRedisStore } from '../../src/limiter/redis/store.js';
import type { BucketSpec } from '../../src/limiter/types.js';
import {
  skipCluster,
  skipRedis,
  startRedis,
  startRedisCluster,
  type ClusterHandle,
  type RedisHandle,
} from '../support/redis.js';
import { scaledMs } from '../support/speed.js';

let seq = 0;
function spec(): BucketSpec {
  return {
    key: `cred-${++seq}:{ip:192.0.2.1}`,
    limit: 5,
    periodMs: 60_000,
    algorithm: 'fixed-window',
    cost: 1,
    shadow: false,
    onError: 'deny',
  };
}

describe.skipIf(skipRedis('the Redis credential tests'))('credentials and database number reaching Redis', () => {
  let redis: RedisHandle;
  beforeAll(async () => {
    // A default-user password and an ACL user of its own.
    redis = await startRedis(['--requirepass', 'topsecret', '--user', 'gate', 'on', '>s3cr3t', '~*', '&*', '+@all']);
  });
  afterAll(async () => redis?.stop());

  const hostPort = (): string => `${redis.node.host}:${redis.node.port}`;

  it("authenticates as the URL's ACL user and writes into the URL's database", async () => {
    const s = createRedisStore({ url: `redis://gate:s3cr3t@${hostPort()}/2`, prefix: 'cred', timeoutMs: 1_000 });
    await s.ready(5_000);
    const b = spec();
    expect((await s.consume([b])).buckets[0]!.remaining).toBe(4);
    const admin = new Redis({ host: redis.node.host, port: redis.node.port, password: 'topsecret', db: 2 });
    expect(await admin.exists(`cred:${b.key}`)).toBe(1);
    await admin.select(0);
    expect(await admin.exists(`cred:${b.key}`)).toBe(0);
    admin.disconnect();
    await s.close();
  });

  it('authenticates with a password alone (the default user)', async () => {
    const s = createRedisStore({ url: `redis://:topsecret@${hostPort()}`, prefix: 'cred', timeoutMs: 1_000 });
    await s.ready(5_000);
    expect((await s.consume([spec()])).allowed).toBe(true);
    await s.close();
  });

  it('does not connect with a wrong password', async () => {
    const s = createRedisStore({ url: `redis://gate:wrong@${hostPort()}`, prefix: 'cred', timeoutMs: 200 });
    await expect(s.ready(500)).rejects.toThrow(/not connected/);
    await expect(s.consume([spec()])).rejects.toBeInstanceOf(StoreError);
    await s.close();
  });
});

describe.skipIf(skipCluster('the Redis Cluster credential test'))('credentials reaching a Redis Cluster', () => {
  let cluster: ClusterHandle;
  beforeAll(async () => {
    cluster = await startRedisCluster({ password: 'clusterpw' });
  });
  afterAll(async () => cluster?.stop());

  it(
    'connects to a password-protected cluster from a redis-cluster://:password@ URL, and not without it',
    async () => {
      const seeds = cluster.url.slice('redis-cluster://'.length);
      const s = createRedisStore({ url: `redis-cluster://:clusterpw@${seeds}`, prefix: 'cred', timeoutMs: 1_000 });
      await s.ready(5_000);
      // Buckets of two identities: two slots, so the cross-slot path (and every master) is reached.
      const out = await s.consume([spec(), { ...spec(), key: `cred-${++seq}:{acct:a:1}` }]);
      expect(out.allowed).toBe(true);
      await s.ping();
      await s.close();
      const without = createRedisStore({ url: cluster.url, prefix: 'cred', timeoutMs: 200 });
      await expect(without.ready(1_000)).rejects.toThrow(/not connected/);
      await without.close();
    },
    scaledMs(30_000),
  );
});

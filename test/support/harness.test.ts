import { describe, expect, it } from 'vitest';
import { Cluster, Redis } from 'ioredis';
import { skipCluster, skipRedis, skipUnlessOwnRedis, redisFixture, clusterFixture } from './redis.js';

describe.skipIf(skipRedis('the Redis harness test'))('the Redis harness', () => {
  const redis = redisFixture();

  it('starts a real Redis that stores and returns a value', async () => {
    const client = new Redis(redis.url);
    await client.set('harness', 'yes');
    expect(await client.get('harness')).toBe('yes');
    client.disconnect();
  });

  it.skipIf(skipUnlessOwnRedis('a test that kills its Redis'))(
    'kills and restarts a binary-backed Redis on the same port',
    async () => {
      const client = new Redis(redis.url, {
        maxRetriesPerRequest: 0,
        enableOfflineQueue: false,
        retryStrategy: () => 50,
      });
      client.on('error', () => {});
      await new Promise((r) => client.once('ready', r));
      await client.set('k', '1');
      await redis.node.kill();
      await expect(client.get('k')).rejects.toThrow();
      await redis.node.restart();
      if (client.status !== 'ready') await new Promise((r) => client.once('ready', r));
      // Nothing persisted: a restarted Redis is empty, as a crashed cache would be.
      expect(await client.get('k')).toBeNull();
      client.disconnect();
    },
  );
});

describe.skipIf(skipCluster('the Redis Cluster harness test'))('the Redis Cluster harness', () => {
  const cluster = clusterFixture();

  it('forms three masters covering every slot, and routes keys of different slots', async () => {
    const client = new Cluster(cluster.nodes.map((n) => ({ host: n.host, port: n.port })));
    const keys = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
    for (const k of keys) await client.set(k, k.toUpperCase());
    for (const k of keys) expect(await client.get(k)).toBe(k.toUpperCase());
    const masters = client.nodes('master');
    expect(masters).toHaveLength(3);
    const perNode = await Promise.all(masters.map((m) => m.dbsize()));
    // Eight keys over three masters: more than one master holds some.
    expect(perNode.filter((n) => n > 0).length).toBeGreaterThan(1);
    await client.quit();
  });
});

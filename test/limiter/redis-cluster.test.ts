import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreTimeoutError } from '../../src/limiter/errors.js';
import { createRedisStore, type RedisStore } from '../../src/limiter/redis/store.js';
import { keySlot } from '../../src/limiter/redis/slot.js';
import type { BucketSpec } from '../../src/limiter/types.js';
import { FakeClock } from '../support/clock.js';
import { skipCluster, startRedisCluster, type ClusterHandle, type RedisNode } from '../support/redis.js';
import { composedStoreContracts, storeContract } from './store.contract.js';
import { eventually } from '../support/eventually.js';

let seq = 0;
function spec(tag: string, over: Partial<BucketSpec> = {}): BucketSpec {
  return {
    key: `c${++seq}:{${tag}}`,
    limit: 5,
    periodMs: 60_000,
    algorithm: 'fixed-window',
    cost: 1,
    shadow: false,
    onError: 'local',
    ...over,
  };
}

describe.skipIf(skipCluster('the Redis Cluster store tests'))('the Redis Cluster store', () => {
  let cluster: ClusterHandle;
  const open: RedisStore[] = [];
  async function store(over: { timeoutMs?: number; now?: () => number; batching?: boolean } = {}): Promise<RedisStore> {
    const s = createRedisStore({
      url: cluster.url,
      prefix: 'rgtest',
      timeoutMs: over.timeoutMs ?? 2_000,
      ...(over.now ? { now: over.now } : {}),
      ...(over.batching !== undefined ? { batching: over.batching } : {}),
    });
    open.push(s);
    await s.ready();
    return s;
  }
  /** The node serving a slot, from the node's own view of the slot map. */
  async function nodeOf(slot: number): Promise<RedisNode> {
    const c = new Redis(cluster.nodes[0]!.url);
    try {
      const slots = (await c.call('CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
      const range = slots.find(([from, to]) => slot >= from && slot <= to)!;
      return cluster.nodes.find((n) => n.port === range[2][1])!;
    } finally {
      c.disconnect();
    }
  }

  beforeAll(async () => {
    cluster = await startRedisCluster();
  });
  afterAll(async () => {
    await Promise.all(open.map((s) => s.close()));
    await cluster?.stop();
  });

  storeContract('redis-cluster', async (clock) => store({ now: clock.now }));
  composedStoreContracts('redis-cluster', () => cluster.url);

  it('computes the same hash slot as Redis for tagged, empty-tagged and non-ASCII keys', async () => {
    const c = new Redis(cluster.nodes[0]!.url);
    const keys = [
      'a',
      'rategate:sign-up:{ip:203.0.113.7}',
      'x{}y',
      '{}{a}',
      'p:{acct:42}:q',
      'x{',
      'ø{é}',
      '{user1000}.following',
      'ключ',
    ];
    for (const k of keys) expect(keySlot(k)).toBe(Number(await c.call('CLUSTER', 'KEYSLOT', k)));
    c.disconnect();
  });

  it("puts the contract suite's IP and account buckets in different slots on different masters", async () => {
    const ip = keySlot('rgtest:x:{ip:192.0.2.1}');
    const acct = keySlot('rgtest:x:{acct:1}');
    expect(ip).not.toBe(acct);
    expect((await nodeOf(ip)).port).not.toBe((await nodeOf(acct)).port);
  });

  it('refunds a slot that charged when another slot of the request fails, even when its reply comes late', async () => {
    // Two tags on different masters; the account's master is paused past the store timeout, so the
    // request fails with a timeout; its late charge, made when the pause ends, is refunded too.
    const clock = new FakeClock(Date.UTC(2026, 10, 21, 19, 0, 0));
    const s = await store({ timeoutMs: 150, now: clock.now });
    const ipTag = 'ip:192.0.2.1';
    let acctTag = 'acct:1';
    const ipNode = await nodeOf(keySlot(`x:{${ipTag}}`));
    for (let i = 1; (await nodeOf(keySlot(`x:{acct:${i}}`))).port === ipNode.port; i++) acctTag = `acct:${i + 1}`;
    const ipBucket = spec(ipTag, { limit: 3 });
    const acctBucket = spec(acctTag, { limit: 3 });
    const acctNode = await nodeOf(keySlot(`x:{${acctTag}}`));
    const pauser = new Redis(acctNode.url);
    await pauser.call('CLIENT', 'PAUSE', '400', 'ALL');
    const t0 = Date.now();
    await expect(s.consume([ipBucket, acctBucket])).rejects.toBeInstanceOf(StoreTimeoutError);
    expect(Date.now() - t0).toBeLessThan(400);
    // Until the pause is over and the late replies are in (a peek queues behind the late charge on its
    // node's connection): what they charged, refunded, is what peek reads.
    await eventually(
      async () => {
        expect(await s.peek(acctBucket)).toMatchObject({ remaining: 3 });
        expect(await s.peek(ipBucket)).toMatchObject({ remaining: 3 });
      },
      { what: 'both buckets refunded' },
    );
    pauser.disconnect();
    expect(s.refundFailures).toBe(0);
  });

  it('reports a request spanning slots that is rejected with the passing buckets uncharged, and keeps shadow buckets out of refunds', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 21, 19, 0, 0));
    const s = await store({ now: clock.now });
    const ip = spec('ip:192.0.2.9', { limit: 4 });
    const shadowFull = spec('ip:192.0.2.9', { limit: 1, shadow: true });
    const acct = spec('acct:99', { limit: 1 });
    expect((await s.consume([shadowFull])).allowed).toBe(true);
    expect((await s.consume([acct])).allowed).toBe(true);
    const out = await s.consume([ip, shadowFull, acct]);
    expect(out.allowed).toBe(false);
    expect(out.buckets).toEqual([
      { remaining: 4, resetAt: clock.now(), limited: false, retryAt: clock.now() },
      {
        remaining: 0,
        resetAt: Date.UTC(2026, 10, 21, 19, 1, 0),
        limited: true,
        retryAt: Date.UTC(2026, 10, 21, 19, 1, 0),
      },
      {
        remaining: 0,
        resetAt: Date.UTC(2026, 10, 21, 19, 1, 0),
        limited: true,
        retryAt: Date.UTC(2026, 10, 21, 19, 1, 0),
      },
    ]);
    expect((await s.peek(ip)).remaining).toBe(4);
    expect((await s.peek(shadowFull)).remaining).toBe(0);
  });

  it('sends each call at once by default: different clients rarely share a slot, so batches would not fill', async () => {
    // A clock of its own: on the wall clock, a burst across a minute's edge is counted in two windows.
    const s = await store({ now: new FakeClock(Date.UTC(2026, 10, 21, 19, 0, 30)).now });
    const b = spec('ip:10.3.0.1', { limit: 10 });
    const before = s.batchedRequests;
    const outs = await Promise.all(Array.from({ length: 12 }, () => s.consume([b])));
    expect(outs.filter((o) => o.allowed)).toHaveLength(10);
    expect(s.batchedRequests - before).toBe(0);
  });

  it('with batching on, batches the calls of one turn by slot and routes each batch to its slot, beside cross-slot calls', async () => {
    const s = await store({ batching: true });
    // 200 identities over many slots: single-slot requests (batched per slot) and cross-slot ones.
    const single = Array.from({ length: 200 }, (_, i) => [
      spec(`ip:10.1.0.${i}`, { limit: 3 }),
      spec(`ip:10.1.0.${i}`, { limit: 5 }),
    ]);
    const cross = Array.from({ length: 50 }, (_, i) => [
      spec(`ip:10.2.0.${i}`, { limit: 3 }),
      spec(`acct:${i}`, { limit: 3 }),
    ]);
    // Every single-slot request twice in the same turn: the second must see the first's charge.
    const calls = [...single, ...cross, ...single];
    const before = { batches: s.batchesSent, requests: s.batchedRequests };
    const outs = await Promise.all(calls.map((r) => s.consume(r)));
    expect(outs.every((o) => o.allowed)).toBe(true);
    expect(outs.slice(0, 200).map((o) => o.buckets[0]!.remaining)).toEqual(Array(200).fill(2));
    expect(outs.slice(250).map((o) => o.buckets[0]!.remaining)).toEqual(Array(200).fill(1));
    // 400 single-slot calls went through batches (cross-slot calls never do), fewer than one per call.
    expect(s.batchedRequests - before.requests).toBe(400);
    expect(s.batchesSent - before.batches).toBeLessThan(400);
    expect((await Promise.all(cross.map((r) => s.peek(r[1]!)))).every((b) => b.remaining === 2)).toBe(true);
  });
});

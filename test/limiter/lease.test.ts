/**
 * Leased quotas on real Redis with several gateways (in-process store stacks, each with its own
 * connection, as the factory builds them): never over the limit, exactly the limit under continued
 * traffic, and what a gateway can strand when its traffic stops and when it gives it back.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Algorithm } from '../../src/config/types.js';
import type { BlockedCacheStore } from '../../src/limiter/blocked.js';
import { createStoreFor, type StoreHandle } from '../../src/limiter/factory.js';
import type { LeaseStore } from '../../src/limiter/redis/lease.js';
import type { BucketSpec } from '../../src/limiter/types.js';
import { FakeClock } from '../support/clock.js';
import {
  skipCluster,
  skipRedis,
  startRedis,
  startRedisCluster,
  type ClusterHandle,
  type RedisHandle,
} from '../support/redis.js';
import { startSentinelGroup, type SentinelGroup } from '../support/redis-ha.js';
import { scaledMs } from '../support/speed.js';

const ALGORITHMS: Algorithm[] = ['fixed-window', 'sliding-window', 'token-bucket'];
/** Long periods: no window boundary and no refill worth a token falls inside a real-time test. */
const LONG: Record<Algorithm, number> = {
  'fixed-window': 30 * 86_400_000,
  'sliding-window': 30 * 86_400_000,
  'token-bucket': 30 * 86_400_000,
};

let seq = 0;
function bucket(
  algorithm: Algorithm,
  limit: number,
  periodMs = LONG[algorithm],
  key = `lease-${process.pid}-${seq++}:{ip:203.0.113.7}`,
): BucketSpec {
  return { key, limit, periodMs, algorithm, cost: 1, shadow: false, onError: 'local' };
}

async function gateways(url: string, n: number, opts: { clock?: FakeClock } = {}): Promise<StoreHandle[]> {
  const clock = opts.clock;
  return Promise.all(
    Array.from({ length: n }, () =>
      createStoreFor(
        { url, prefix: 'lt', timeout: 2_000, onError: 'deny', lease: true, gateways: n },
        clock ? { now: clock.now, clock: { now: clock.now, after: clock.after } } : {},
      ),
    ),
  );
}

const leases = (h: StoreHandle): LeaseStore => h.leases!;

/** Bursts of concurrent requests to every gateway in turn until a whole round is rejected; returns the admitted count. */
async function untilAllRejected(
  hs: readonly StoreHandle[],
  specs: readonly BucketSpec[],
  burst: number,
): Promise<number> {
  let admitted = 0;
  for (let round = 0; round < 10_000; round++) {
    const outs = await Promise.all(hs.flatMap((h) => Array.from({ length: burst }, () => h.store.consume(specs))));
    const ok = outs.filter((o) => o.allowed).length;
    admitted += ok;
    if (ok === 0) return admitted;
  }
  throw new Error('never rejected');
}

/** As untilAllRejected, each request asked of consumeLocal first (a held lease answers at once), as the request path asks. */
async function untilAllRejectedLocalFirst(
  hs: readonly StoreHandle[],
  specs: readonly BucketSpec[],
  burst: number,
): Promise<{ admitted: number; local: number }> {
  let admitted = 0;
  let local = 0;
  for (let round = 0; round < 10_000; round++) {
    const outs = await Promise.all(
      hs.flatMap((h) =>
        Array.from({ length: burst }, () => {
          const out = h.store.consumeLocal!(specs);
          if (out !== undefined && out.allowed) local++;
          return out !== undefined ? Promise.resolve(out) : h.store.consume(specs);
        }),
      ),
    );
    const ok = outs.filter((o) => o.allowed).length;
    admitted += ok;
    if (ok === 0) return { admitted, local };
  }
  throw new Error('never rejected');
}

async function closeAll(hs: readonly StoreHandle[]): Promise<void> {
  await Promise.all(hs.map((h) => h.store.close()));
}

describe.skipIf(skipRedis('the lease tests'))('leases on one Redis', () => {
  let redis: RedisHandle;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  for (const algorithm of ALGORITHMS) {
    it(`${algorithm}: three gateways under continued traffic admit exactly the limit, mostly from leases`, async () => {
      const hs = await gateways(redis.url, 3);
      try {
        const limit = 600;
        const specs = [bucket(algorithm, limit), bucket(algorithm, 10 * limit)];
        const admitted = await untilAllRejected(hs, specs, 12);
        expect(admitted).toBe(limit);
        const local = hs.reduce((n, h) => n + leases(h).localAdmissions, 0);
        expect(local).toBeGreaterThan(limit / 3);
        // Nothing stranded in the limiting bucket; the wide one's count is the admitted count plus what is held.
        expect(hs.map((h) => leases(h).heldTokens(specs[0]!.key))).toEqual([0, 0, 0]);
        const heldWide = hs.reduce((n, h) => n + leases(h).heldTokens(specs[1]!.key), 0);
        expect((await hs[0]!.store.peek(specs[1]!)).remaining + heldWide).toBe(9 * limit);
      } finally {
        await closeAll(hs);
      }
    });

    it(`${algorithm}: three gateways asked synchronously first (consumeLocal) admit exactly the limit, never more`, async () => {
      const hs = await gateways(redis.url, 3);
      try {
        const limit = 600;
        const specs = [bucket(algorithm, limit), bucket(algorithm, 10 * limit)];
        const { admitted, local } = await untilAllRejectedLocalFirst(hs, specs, 12);
        expect(admitted).toBe(limit);
        expect(local).toBeGreaterThan(limit / 3);
        expect(hs.map((h) => leases(h).heldTokens(specs[0]!.key))).toEqual([0, 0, 0]);
      } finally {
        await closeAll(hs);
      }
    });

    it(`${algorithm}: what a gateway strands when its traffic stops is at most remaining ÷ (2 × gateways), and comes back when it idles`, async () => {
      const clock = new FakeClock();
      const hs = await gateways(redis.url, 2, { clock });
      try {
        const limit = 1_000;
        const spec = bucket(algorithm, limit);
        const a = hs[0]!;
        let admitted = 0;
        for (let i = 0; i < 40; i++) if ((await a.store.consume([spec])).allowed) admitted++;
        expect(admitted).toBe(40);
        const held = leases(a).heldTokens();
        expect(held).toBeGreaterThan(0);
        expect(held).toBeLessThanOrEqual(limit / 4);
        // The store counts the lease as spent; the other gateway sees it so.
        expect((await hs[1]!.store.peek(spec)).remaining).toBe(limit - admitted - held);
        clock.advance(1_000);
        await leases(a).settled();
        expect(leases(a).heldTokens()).toBe(0);
        expect((await hs[1]!.store.peek(spec)).remaining).toBe(limit - admitted);
      } finally {
        await closeAll(hs);
      }
    });

    it(`${algorithm}: a lease left when its gateway's traffic stops is admitted at a gateway the store had refused, once given back`, async () => {
      // A burst that moves from one gateway to another (a client's connection re-made elsewhere): the
      // first holds a lease when its traffic stops, the second is refused while the store counts that
      // lease as spent. Its blocked-bucket cache must not refuse the key until the window ends: the
      // tokens come back within the lease's age and the sweep, and the limit is then reached exactly.
      const clock = new FakeClock();
      const hs = await gateways(redis.url, 2, { clock });
      try {
        const limit = 100;
        const spec = bucket(algorithm, limit);
        const [a, b] = [hs[0]!, hs[1]!];
        let admitted = 0;
        for (let i = 0; i < 30; i++) if ((await a.store.consume([spec])).allowed) admitted++;
        const held = leases(a).heldTokens();
        expect(held).toBeGreaterThan(0);
        while ((await b.store.consume([spec])).allowed) admitted++;
        expect(admitted).toBe(limit - held);
        // Refused: the next requests are the blocked-bucket cache's, not the store's (a flood stays cheap).
        const cache = b.store as BlockedCacheStore;
        const rejected = cache.localRejections;
        for (let i = 0; i < 5; i++) expect((await b.store.consume([spec])).allowed).toBe(false);
        expect(cache.localRejections).toBe(rejected + 5);
        clock.advance(leases(a).returnedWithinMs);
        await leases(a).settled();
        expect(leases(a).heldTokens()).toBe(0);
        for (let i = 0; i < 2 * held; i++) if ((await b.store.consume([spec])).allowed) admitted++;
        expect(admitted).toBe(limit);
      } finally {
        await closeAll(hs);
      }
    });

    it(`${algorithm}: a drained gateway gives its leases back before it closes`, async () => {
      const clock = new FakeClock();
      const hs = await gateways(redis.url, 2, { clock });
      const spec = bucket(algorithm, 500);
      try {
        for (let i = 0; i < 30; i++) await hs[0]!.store.consume([spec]);
        expect(leases(hs[0]!).heldTokens()).toBeGreaterThan(0);
        await hs[0]!.store.close();
        expect((await hs[1]!.store.peek(spec)).remaining).toBe(500 - 30);
      } finally {
        await hs[1]!.store.close();
      }
    });
  }

  it('with one gateway, X-RateLimit-Remaining is the exact remaining after every request (scripted time)', async () => {
    const clock = new FakeClock();
    const [h] = await gateways(redis.url, 1, { clock });
    try {
      for (const algorithm of ALGORITHMS) {
        const spec = bucket(algorithm, 50);
        for (let i = 1; i <= 50; i++) {
          const out = await h!.store.consume([spec]);
          expect(out.allowed).toBe(true);
          expect(out.buckets[0]!.remaining).toBe(50 - i);
        }
        expect((await h!.store.consume([spec])).allowed).toBe(false);
      }
      expect(leases(h!).localAdmissions).toBeGreaterThan(0);
    } finally {
      await h!.store.close();
    }
  });

  it('with two gateways, a store-decided Remaining never over-states and under-states by at most the other gateway’s lease', async () => {
    const clock = new FakeClock();
    const hs = await gateways(redis.url, 2, { clock });
    try {
      for (const algorithm of ALGORITHMS) {
        const spec = bucket(algorithm, 200);
        let admitted = 0;
        let checked = 0;
        for (let i = 0; i < 260; i++) {
          const [self, other] = i % 2 === 0 ? [hs[0]!, hs[1]!] : [hs[1]!, hs[0]!];
          const before = leases(self).localAdmissions;
          const out = await self.store.consume([spec]);
          if (out.allowed) admitted++;
          if (leases(self).localAdmissions !== before || !out.allowed) continue;
          const truth = 200 - admitted;
          expect(out.buckets[0]!.remaining).toBeLessThanOrEqual(truth);
          expect(out.buckets[0]!.remaining).toBeGreaterThanOrEqual(truth - leases(other).heldTokens(spec.key));
          checked++;
        }
        expect(admitted).toBe(200);
        expect(checked).toBeGreaterThan(2);
      }
    } finally {
      await closeAll(hs);
    }
  });

  it('a lease taken in one window is never spent in the next (fixed window): the next window admits exactly the limit', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 21, 19, 0, 0, 900));
    const hs = await gateways(redis.url, 2, { clock });
    try {
      const spec = bucket('fixed-window', 40, 1_000);
      for (let i = 0; i < 10; i++) await hs[0]!.store.consume([spec]);
      expect(leases(hs[0]!).heldTokens()).toBeGreaterThan(0);
      clock.advance(100); // the next window starts
      const before = leases(hs[0]!).localAdmissions;
      expect((await hs[0]!.store.consume([spec])).allowed).toBe(true);
      expect(leases(hs[0]!).localAdmissions).toBe(before);
      expect(1 + (await untilAllRejected(hs, [spec], 5))).toBe(40);
    } finally {
      await closeAll(hs);
    }
  });

  it('a reload that changes the rule gives the old lease back and never spends it under the new rule', async () => {
    const clock = new FakeClock();
    const [h, other] = await gateways(redis.url, 2, { clock });
    try {
      const old = bucket('fixed-window', 400);
      for (let i = 0; i < 30; i++) await h!.store.consume([old]);
      expect(leases(h!).heldTokens()).toBeGreaterThan(0);
      const changed = { ...old, limit: 40 };
      const out = await h!.store.consume([changed]);
      expect(out.allowed).toBe(true);
      await leases(h!).settled();
      // 31 admitted in all; the old lease is back in the store, the new rule's lease is counted there.
      expect((await other!.store.peek(old)).remaining + leases(h!).heldTokens()).toBe(400 - 31);
    } finally {
      await closeAll([h!, other!]);
    }
  });

  it('a request whose buckets lack a lease goes to the store, and the blocked-bucket cache still spares it floods', async () => {
    const clock = new FakeClock();
    const [h] = await gateways(redis.url, 1, { clock });
    try {
      const wide = bucket('fixed-window', 1_000);
      const tight = bucket('fixed-window', 3);
      let ok = 0;
      for (let i = 0; i < 20; i++) if ((await h!.store.consume([wide, tight])).allowed) ok++;
      expect(ok).toBe(3);
      // The wide bucket was charged only for admitted requests (and a lease of this gateway's).
      expect((await h!.store.peek(wide)).remaining + leases(h!).heldTokens()).toBe(1_000 - 3);
    } finally {
      await h!.store.close();
    }
  });

  it('store.lease: false asks the store for every request', async () => {
    const h = await createStoreFor({ url: redis.url, prefix: 'lt', timeout: 2_000, onError: 'deny', lease: false });
    try {
      const spec = bucket('fixed-window', 100);
      for (let i = 0; i < 20; i++) await h.store.consume([spec]);
      expect(h.leases).toBeUndefined();
      expect((await h.store.peek(spec)).remaining).toBe(80);
    } finally {
      await h.store.close();
    }
  });
});

describe.skipIf(skipRedis('the lease fault tests'))('leases while Redis fails', () => {
  for (const onError of ['deny', 'local'] as const) {
    it(
      `spends what it holds (counted before the failure), then follows onError: ${onError}, and the fallback grants no lease`,
      async () => {
        const redis = await startRedis();
        const h = await createStoreFor(
          { url: redis.url, prefix: 'lf', timeout: 200, onError, lease: true, gateways: 1 },
          { connectWaitMs: 5_000 },
        );
        try {
          const spec = { ...bucket('fixed-window', 10_000), onError };
          for (let i = 0; i < 50; i++) expect((await h.store.consume([spec])).allowed).toBe(true);
          const held = leases(h).heldTokens(spec.key);
          expect(held).toBeGreaterThan(0);
          await redis.node.kill();
          let fromLease = 0;
          for (let i = 0; i < held; i++) if ((await h.store.consume([spec])).allowed) fromLease++;
          expect(fromLease).toBe(held);
          expect(leases(h).heldTokens(spec.key)).toBe(0);
          if (onError === 'deny') {
            await expect(h.store.consume([spec])).rejects.toThrow(/unavailable|store/i);
          } else {
            for (let i = 0; i < 20; i++) expect((await h.store.consume([spec])).allowed).toBe(true);
            expect(h.fallbackActive()).toBe(true);
            expect(leases(h).heldTokens(spec.key)).toBe(0);
          }
        } finally {
          await h.store.close();
          await redis.stop();
        }
      },
      scaledMs(30_000),
    );
  }
});

describe.skipIf(skipCluster('the lease cluster test'))('leases on a Redis Cluster', () => {
  let cluster: ClusterHandle;
  beforeAll(async () => {
    cluster = await startRedisCluster();
  }, scaledMs(60_000));
  afterAll(async () => {
    await cluster?.stop();
  });

  it(
    'two gateways admit exactly the limit per bucket across slots, from leases',
    async () => {
      const hs = await gateways(cluster.url, 2);
      try {
        for (const algorithm of ALGORITHMS) {
          const specs = [
            bucket(algorithm, 300, LONG[algorithm], `lc-${seq++}:{ip:198.51.100.${seq}}`),
            bucket(algorithm, 3_000, LONG[algorithm], `lc-${seq++}:{ip:198.51.100.${seq}}`),
          ];
          // Same hash tag per bucket but two tags: the request spans two slots (reserve and refund, no lease).
          const oneSlot = [
            bucket(algorithm, 200, LONG[algorithm], `lc-${seq}:{ip:192.0.2.1}`),
            bucket(algorithm, 2_000, LONG[algorithm], `lc-${seq++}b:{ip:192.0.2.1}`),
          ];
          expect(await untilAllRejected(hs, oneSlot, 10)).toBe(200);
          expect(await untilAllRejected(hs, specs, 10)).toBe(300);
        }
        expect(hs.reduce((n, h) => n + leases(h).localAdmissions, 0)).toBeGreaterThan(0);
      } finally {
        await closeAll(hs);
      }
    },
    scaledMs(60_000),
  );
});

describe.skipIf(skipCluster('the lease Sentinel test'))('leases on a Sentinel-managed Redis', () => {
  let group: SentinelGroup;
  beforeAll(async () => {
    group = await startSentinelGroup();
  }, scaledMs(60_000));
  afterAll(async () => {
    await group?.stop();
  });

  it(
    'two gateways admit exactly the limit, from leases',
    async () => {
      const hs = await gateways(group.url, 2);
      try {
        for (const algorithm of ALGORITHMS) {
          const specs = [bucket(algorithm, 300), bucket(algorithm, 3_000)];
          expect(await untilAllRejected(hs, specs, 10)).toBe(300);
        }
        expect(hs.reduce((n, h) => n + leases(h).localAdmissions, 0)).toBeGreaterThan(0);
      } finally {
        await closeAll(hs);
      }
    },
    scaledMs(60_000),
  );
});

/**
 * The fleet's count as its heartbeats learn it (fleet/fleet.ts), on a real Redis: members started
 * together count each other within a quick beat of joining (issue 37's start-up gap: the first to beat
 * counted itself alone for a whole heartbeat), the count does not fall below `store.gateways` while
 * joining, and a scale-down is still learned.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Fleet } from '../../src/fleet/fleet.js';
import { eventually } from '../support/eventually.js';
import { Redis } from 'ioredis';
import { formatPrefix } from '../../src/limiter/store-format.js';
import { redisFixture, skipRedis, skipUnlessOwnRedis } from '../support/redis.js';
import { scaledMs } from '../support/speed.js';

describe.skipIf(skipRedis('the fleet heartbeat'))("the fleet's count", () => {
  const redis = redisFixture();
  const fleets: Fleet[] = [];
  afterEach(async () => {
    await Promise.all(fleets.splice(0).map((f) => f.close()));
  });

  /** A member counting into `seen` (every count it was told, with when). */
  const join = (prefix: string, floor: number, heartbeatMs?: number) => {
    const seen: { n: number; at: number }[] = [];
    const fleet = new Fleet({
      url: redis.url,
      prefix,
      timeoutMs: 1_000,
      floor,
      onCount: (n) => void seen.push({ n, at: Date.now() }),
      ...(heartbeatMs !== undefined ? { heartbeatMs } : {}),
    });
    fleets.push(fleet);
    return { fleet, seen };
  };

  it('two members started together each count 2 within a second (not at the next 5 s heartbeat)', async () => {
    const prefix = `fleet-join-${process.pid}-${Date.now()}`;
    const start = Date.now();
    // Floor 1: what is measured is the quick beats, not the floor held.
    const [a, b] = [join(prefix, 1), join(prefix, 1)];
    await eventually(() => a.fleet.gateways === 2 && b.fleet.gateways === 2, { what: 'both counting 2' });
    const firstAt = (s: { n: number; at: number }[]) => s.find((c) => c.n === 2)!.at - start;
    console.log(`fleet join: counted 2 after ${firstAt(a.seen)} ms and ${firstAt(b.seen)} ms`);
    expect(Math.max(firstAt(a.seen), firstAt(b.seen))).toBeLessThan(2_000);
  });

  it('holds store.gateways while joining, then learns a smaller fleet (a period later)', async () => {
    const prefix = `fleet-floor-${process.pid}-${Date.now()}`;
    const a = join(prefix, 3, 1_000);
    await eventually(() => a.fleet.known, { what: 'the store answered' });
    expect(a.fleet.gateways).toBe(3);
    await new Promise((r) => setTimeout(r, 400));
    expect(a.fleet.gateways).toBe(3);
    // After the join (one period), the next beat counts what is registered: this one.
    await eventually(() => a.fleet.gateways === 1, { what: 'counting 1', withinMs: 3_000 });
    expect(a.seen.map((c) => c.n)).toEqual([3, 1]);
  });

  it('learns a member leaving', async () => {
    const prefix = `fleet-leave-${process.pid}-${Date.now()}`;
    const [a, b] = [join(prefix, 1, 1_000), join(prefix, 1, 1_000)];
    await eventually(() => a.fleet.gateways === 2 && b.fleet.gateways === 2, { what: 'both counting 2' });
    await b.fleet.close();
    await eventually(() => a.fleet.gateways === 1, { what: 'counting 1 once the other left', withinMs: 3_000 });
  });

  it.skipIf(skipUnlessOwnRedis('the fleet with Redis restarted'))(
    'joins again after Redis restarts empty: the count held at the last one, not the first member back alone',
    async () => {
      const prefix = `fleet-rejoin-${process.pid}-${Date.now()}`;
      const [a, b] = [join(prefix, 1, 1_000), join(prefix, 1, 1_000)];
      await eventually(() => a.fleet.gateways === 2 && b.fleet.gateways === 2, { what: 'both counting 2' });
      // Past the join: from here on a count is what the set holds.
      await new Promise((r) => setTimeout(r, 1_200));
      const since = Date.now();
      await redis.node.kill();
      await redis.node.restart(); // empty: the set is gone, each member registers again as it reconnects
      const direct = new Redis(redis.url);
      try {
        const set = `${formatPrefix(prefix)}:{fleet}:gateways`;
        await eventually(async () => (await direct.zcard(set)) === 2, { what: 'both registered again' });
      } finally {
        direct.disconnect();
      }
      // Through the join after the reconnection (one period) and a beat past it.
      await new Promise((r) => setTimeout(r, 2_500));
      const after = [...a.seen, ...b.seen].filter((c) => c.at >= since).map((c) => c.n);
      expect(after.filter((n) => n !== 2)).toEqual([]);
      expect([a.fleet.gateways, b.fleet.gateways]).toEqual([2, 2]);
    },
    scaledMs(20_000),
  );
});

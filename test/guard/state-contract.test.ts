/**
 * One contract for both guard states (memory: this process; Redis: shared): the same writes and ban
 * counts give the same local picture, the same answers and the same cap. Redis also: a second replica
 * follows the first through the change log, entry by entry.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryGuardState, type GuardState } from '../../src/guard/state.js';
import { RedisGuardState } from '../../src/guard/redis-state.js';
import { skipRedis, startRedis, type RedisHandle } from '../support/redis.js';
import { waitFor } from '../support/process.js';

interface Made {
  state: GuardState;
  setNow(t: number): void;
  close(): Promise<void>;
}

function contract(name: string, make: () => Promise<Made>): void {
  describe(`${name} guard state`, () => {
    it('puts and removes entries, each in the local picture at once', async () => {
      const m = await make();
      try {
        const s = m.state;
        await s.put({
          kind: 'block',
          id: '203.0.113.0/24',
          reason: 'r',
          createdAt: 1,
          expiresAt: 60_000,
          who: 'token ab from 127.0.0.1',
        });
        await s.put({ kind: 'exempt', id: '198.51.100.7', reason: 'office', createdAt: 1, expiresAt: null });
        expect(s.view.blocks.contains('203.0.113.9')).toBe(true);
        expect(s.view.exempts.contains('198.51.100.7')).toBe(true);
        expect(await s.remove('block', '203.0.113.0/24')).toMatchObject({
          kind: 'block',
          id: '203.0.113.0/24',
          who: 'token ab from 127.0.0.1',
        });
        expect(s.view.blocks.contains('203.0.113.9')).toBe(false);
        expect(await s.remove('block', '203.0.113.0/24')).toBeNull();
        expect(s.view.live(1_000).map((e) => e.id)).toEqual(['198.51.100.7']);
      } finally {
        await m.close();
      }
    });

    it('starts a ban at its limit, not again while it holds, and ends the oldest beyond maxActive', async () => {
      const m = await make();
      try {
        const s = m.state;
        const count = (key: string, at: number) =>
          s.countBan({ id: `login/${key}`, limit: 2, periodMs: 60_000, banMs: 10_000, reason: 'x', maxActive: 2 }, at);
        expect(await count('ip:10.0.0.1', 1_000)).toBeNull();
        expect(await count('ip:10.0.0.1', 1_001)).toMatchObject({
          entry: { id: 'login/ip:10.0.0.1', expiresAt: 11_001, who: 'ban login' },
          dropped: [],
        });
        expect(await count('ip:10.0.0.1', 1_002)).toBeNull(); // banned: not counted
        for (const [i, at] of [
          [2, 2_000],
          [3, 3_000],
        ] as const) {
          await count(`ip:10.0.0.${i}`, at);
          const started = await count(`ip:10.0.0.${i}`, at);
          expect(started?.dropped).toEqual(i === 3 ? ['login/ip:10.0.0.1'] : []);
        }
        expect([...s.view.byBan.get('login')!.keys()].sort()).toEqual(['ip:10.0.0.2', 'ip:10.0.0.3']);
        expect(s.view.ipBans.has('ip:10.0.0.1')).toBe(false);
        // An expired ban takes no room: a new one beyond the cap ends nothing live.
        await count('ip:10.0.0.4', 12_500);
        m.setNow(12_500);
        expect((await count('ip:10.0.0.4', 12_500))?.dropped).toEqual([]);
      } finally {
        await m.close();
      }
    });
  });
}

contract('memory', () => {
  let now = 0;
  const state = new MemoryGuardState(() => now);
  return Promise.resolve({ state, setNow: (t) => void (now = t), close: () => state.close() });
});

describe.skipIf(skipRedis('the Redis guard state contract'))('on Redis', () => {
  let redis: RedisHandle;
  let n = 0;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => redis?.stop());

  contract('Redis', async () => {
    let now = 0;
    const state = new RedisGuardState({ url: redis.url, prefix: `contract${++n}`, timeoutMs: 2_000, now: () => now });
    await state.ready(5_000);
    await state.sync();
    return { state, setNow: (t) => void (now = t), close: () => state.close() };
  });

  it('a second replica follows the first entry by entry, and reads only the changes', async () => {
    const prefix = `follow${++n}`;
    const a = new RedisGuardState({ url: redis.url, prefix, timeoutMs: 2_000 });
    const b = new RedisGuardState({ url: redis.url, prefix, timeoutMs: 2_000, pollMs: 20 });
    try {
      await Promise.all([a.ready(5_000), b.ready(5_000)]);
      await Promise.all([a.sync(), b.sync()]);
      b.follow(true);
      const resyncs: number[] = [];
      b.events = { restored: () => {}, resynced: (entries) => resyncs.push(entries) };
      const until = Date.now() + 60_000;
      for (let i = 0; i < 50; i++)
        await a.put({ kind: 'block', id: `192.0.2.${i}`, reason: '', createdAt: 0, expiresAt: until });
      await waitFor(() => b.view.blocks.size === 50, 2_000, 'b holding 50 blocks');
      await a.remove('block', '192.0.2.7');
      await waitFor(() => !b.view.blocks.contains('192.0.2.7'), 2_000, 'the removal on b');
      expect(resyncs).toEqual([]);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});

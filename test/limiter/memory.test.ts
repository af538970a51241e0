import { describe, expect, it, vi } from 'vitest';
import { MemoryStore } from '../../src/limiter/memory/store.js';
import { FakeClock } from '../support/clock.js';
import { storeContract, throughConsumeLocal } from './store.contract.js';
import { bucketSpec } from '../support/buckets.js';

storeContract('memory', async (clock) => new MemoryStore({ now: clock.now, sweepIntervalMs: 0 }));
storeContract('memory, decided through consumeLocal', async (clock) =>
  throughConsumeLocal(new MemoryStore({ now: clock.now, sweepIntervalMs: 0 })),
);

describe('the memory store', () => {
  it('sweeps expired buckets in batches so memory stays bounded by one period of clients', () => {
    const clock = new FakeClock();
    const store = new MemoryStore({ now: clock.now, sweepIntervalMs: 0, sweepBatch: 1000 });
    for (let i = 0; i < 5000; i++) {
      store.consumeSync([
        { key: `k${i}`, limit: 5, periodMs: 1000, algorithm: 'fixed-window', cost: 1, shadow: false, onError: 'local' },
      ]);
    }
    expect(store.size).toBe(5000);
    clock.advance(1000);
    store.sweepStep();
    expect(store.size).toBe(4000);
    for (let i = 0; i < 5; i++) store.sweepStep();
    expect(store.size).toBe(0);
  });

  it('keeps a sweep timer only while it holds buckets: none while empty (an idle fallback), none again once all expired', () => {
    vi.useFakeTimers({ now: 0 });
    try {
      const bucket = (key: string) => bucketSpec(key, { limit: 5, periodMs: 1000 });
      const store = new MemoryStore({ sweepIntervalMs: 250 });
      expect(vi.getTimerCount()).toBe(0);
      store.consumeSync([bucket('a')]);
      store.consumeSync([bucket('a'), bucket('b')]);
      expect(vi.getTimerCount()).toBe(1);
      vi.advanceTimersByTime(750);
      expect(store.size).toBe(2);
      vi.advanceTimersByTime(250);
      expect(store.size).toBe(0);
      expect(vi.getTimerCount()).toBe(0);
      store.consumeSync([bucket('c')]);
      expect(vi.getTimerCount()).toBe(1);
      void store.close();
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it('keeps buckets whose window is still open when sweeping', () => {
    const clock = new FakeClock();
    const store = new MemoryStore({ now: clock.now, sweepIntervalMs: 0 });
    store.consumeSync([
      { key: 'short', limit: 5, periodMs: 1000, algorithm: 'fixed-window', cost: 1, shadow: false, onError: 'local' },
    ]);
    store.consumeSync([
      {
        key: 'long',
        limit: 5,
        periodMs: 3_600_000,
        algorithm: 'fixed-window',
        cost: 1,
        shadow: false,
        onError: 'local',
      },
    ]);
    clock.advance(1000);
    store.sweepStep();
    expect(store.size).toBe(1);
  });
});

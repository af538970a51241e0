import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../src/limiter/memory/store.js';
import { FakeClock } from '../support/clock.js';
import { storeContract, throughConsumeLocal } from './store.contract.js';

storeContract('memory', async (clock) => new MemoryStore({ now: clock.now, sweepIntervalMs: 0 }));
storeContract('memory, decided through consumeLocal', async (clock) => throughConsumeLocal(new MemoryStore({ now: clock.now, sweepIntervalMs: 0 })));

describe('the memory store', () => {
  it('sweeps expired buckets in batches so memory stays bounded by one period of clients', () => {
    const clock = new FakeClock();
    const store = new MemoryStore({ now: clock.now, sweepIntervalMs: 0, sweepBatch: 1000 });
    for (let i = 0; i < 5000; i++) {
      store.consumeSync([{ key: `k${i}`, limit: 5, periodMs: 1000, algorithm: 'fixed-window', cost: 1, shadow: false, onError: 'local' }]);
    }
    expect(store.size).toBe(5000);
    clock.advance(1000);
    store.sweepStep();
    expect(store.size).toBe(4000);
    for (let i = 0; i < 5; i++) store.sweepStep();
    expect(store.size).toBe(0);
  });

  it('keeps buckets whose window is still open when sweeping', () => {
    const clock = new FakeClock();
    const store = new MemoryStore({ now: clock.now, sweepIntervalMs: 0 });
    store.consumeSync([{ key: 'short', limit: 5, periodMs: 1000, algorithm: 'fixed-window', cost: 1, shadow: false, onError: 'local' }]);
    store.consumeSync([{ key: 'long', limit: 5, periodMs: 3_600_000, algorithm: 'fixed-window', cost: 1, shadow: false, onError: 'local' }]);
    clock.advance(1000);
    store.sweepStep();
    expect(store.size).toBe(1);
  });
});

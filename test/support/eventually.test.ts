/** @module The poll helper: resolves with the value reached, retries on false or a throw, and fails naming the last one seen. */
import { describe, expect, it } from 'vitest';
import { eventually } from './eventually.js';
import { measureSlowdown, scaledMs, slowdown } from './speed.js';

describe('eventually', () => {
  it('resolves with the first value that is not false, after retrying', async () => {
    let n = 0;
    await expect(eventually(() => (++n >= 3 ? n : false), { everyMs: 1 })).resolves.toBe(3);
  });

  it('takes an assertion as the probe: a throw means not yet', async () => {
    let n = 0;
    await eventually(
      () => {
        n++;
        expect(n).toBe(2);
      },
      { everyMs: 1 },
    );
    expect(n).toBe(2);
  });

  it('fails at the deadline with what it waited for and the last value or error seen', async () => {
    let n = 0;
    await expect(eventually(() => ++n, { what: 'n above 1000', withinMs: 50, until: (v) => v > 1000 })).rejects.toThrow(
      /^n above 1000 not reached within 50 ms( \(\d+ ms on this machine, [\d.]+ times slower\))?; last seen: the value \d+$/,
    );
    await expect(
      eventually(
        () => {
          throw new Error('still starting');
        },
        { withinMs: 30 },
      ),
    ).rejects.toThrow(/last seen: the error still starting/);
  });

  it('waits the written deadline times the measured slowdown before it gives up', async () => {
    const t0 = performance.now();
    await expect(eventually(() => false, { withinMs: 40, everyMs: 5 })).rejects.toThrow(/not reached within 40 ms/);
    // Only a lower bound: a loaded machine may take any longer.
    expect(performance.now() - t0).toBeGreaterThanOrEqual(scaledMs(40) - 1);
  });
});

describe('the machine slowdown', () => {
  it('is a CPU loop timed against the reference machine, at least 1 and at most 20, and scales a deadline up', () => {
    const m = measureSlowdown();
    expect(m).toBeGreaterThanOrEqual(1);
    expect(m).toBeLessThanOrEqual(20);
    expect(slowdown()).toBeGreaterThanOrEqual(1);
    expect(scaledMs(1_000)).toBe(Math.ceil(1_000 * slowdown()));
  });
});

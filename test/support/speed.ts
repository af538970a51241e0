/**
 * @module How slow this machine is right now, for deadlines: a wait that holds on an idle laptop must
 * hold beside `stress-ng --cpu 2` or other suites on the same cores. A small CPU loop is timed on the
 * wall clock against what it takes on the reference machine (an idle 2-core x86-64 VM: 10M rounds in
 * 14.5 ms); the ratio scales every deadline (`scaledMs`), never a claim about speed. Measured once by
 * vitest.config.ts and again when a test file first asks (load changes during a run); the larger counts.
 */
import { inject } from 'vitest';

/** Rounds per sample, and their time on the reference machine. */
const ROUNDS = 4_000_000;
const REFERENCE_MS = 5.8;
/** A slowdown is at least 1 (a faster machine keeps the written deadlines) and at most this. */
const MAX_SLOWDOWN = 20;

function spin(n: number): number {
  let x = 1;
  for (let i = 0; i < n; i++) x = (Math.imul(x, 31) + i) ^ (x >>> 7);
  return x;
}

/** The median of three timed loops over the reference time, within [1, MAX_SLOWDOWN]. */
export function measureSlowdown(): number {
  const ratios: number[] = [];
  let sink = 0;
  for (let i = 0; i < 3; i++) {
    const t0 = performance.now();
    sink ^= spin(ROUNDS);
    ratios.push((performance.now() - t0) / REFERENCE_MS);
  }
  // The loop's result is used, so the compiler cannot drop the loop.
  if (sink === 0.5) ratios.push(0);
  const median = ratios.sort((a, b) => a - b)[1]!;
  return Math.min(MAX_SLOWDOWN, Math.max(1, Math.round(median * 10) / 10));
}

let mine: number | undefined;

/**
 * This run's slowdown: the globalSetup's measure or this file's, whichever is larger; or the number in
 * RATEGATE_TEST_SLOWDOWN, for a machine known to be slow in ways a CPU loop does not show (a slow disk).
 */
export function slowdown(): number {
  const fixed = Number(process.env.RATEGATE_TEST_SLOWDOWN);
  mine ??= fixed >= 1 ? fixed : Math.max(measureSlowdown(), fromSetup());
  return mine;
}

function fromSetup(): number {
  try {
    return inject('slowdown') ?? 1;
  } catch {
    // Outside a vitest worker (a bench script importing a helper): this process's measure alone.
    return 1;
  }
}

/** `ms` scaled by the slowdown: the deadline a wait written for an idle machine gets on this one. */
export function scaledMs(ms: number): number {
  return Math.ceil(ms * slowdown());
}

/**
 * @module The one way a test polls: `eventually(probe)` asks again until the probe holds or a deadline
 * passes, then fails naming what it waited for and the last value it saw (or the last assertion that
 * failed), so a timeout on a busy machine says how far it got instead of "condition not met". Deadlines
 * are written for an idle machine and stretched by its measured slowdown (speed.ts).
 */
import { inspect } from 'node:util';
import { scaledMs, slowdown } from './speed.js';

export interface EventuallyOptions<T> {
  /** What is awaited, for the failure message. */
  readonly what?: string;
  /** The deadline on an idle machine, from the first call (default 5 s); scaled by the machine's slowdown (speed.ts). */
  readonly withinMs?: number;
  /** Pause between two calls (default 20 ms). */
  readonly everyMs?: number;
  /** When the value counts as reached (default: anything but `false`). */
  readonly until?: (value: T) => boolean;
}

/**
 * Calls `probe` until it returns something other than `false` (or what `until` accepts) without
 * throwing, and resolves with that value. A probe may be an assertion: a throw (an `expect` that fails)
 * means "not yet". At the deadline it rejects with the last value or error.
 */
export async function eventually<T>(probe: () => T | Promise<T>, opts: EventuallyOptions<T> = {}): Promise<T> {
  const withinMs = opts.withinMs ?? 5_000;
  const scaled = scaledMs(withinMs);
  const deadline = Date.now() + scaled;
  let last: { value: T } | { error: unknown } | undefined;
  for (;;) {
    try {
      const value = await probe();
      if (opts.until ? opts.until(value) : value !== false) return value;
      last = { value };
    } catch (error) {
      last = { error };
    }
    if (Date.now() >= deadline) break;
    await pause(opts.everyMs ?? 20);
  }
  const seen =
    last === undefined
      ? 'nothing'
      : 'error' in last
        ? `the error ${describe(last.error)}`
        : `the value ${inspect(last.value, { depth: 4 })}`;
  const within =
    scaled === withinMs
      ? `${withinMs} ms`
      : `${withinMs} ms (${scaled} ms on this machine, ${slowdown()} times slower)`;
  throw new Error(`${opts.what ?? 'the condition'} not reached within ${within}; last seen: ${seen}`);
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : inspect(error);
}

/**
 * A fixed wait, for the few places where time itself is the subject (a client's pace, a window that
 * must pass, an event that must NOT happen). Every call says why in a comment.
 */
export function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

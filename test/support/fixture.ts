/** @module Per-block fixtures: something started before a block's tests and stopped after, used as if already started. */
import { afterAll, beforeAll } from 'vitest';

/**
 * A stand-in for what `get` returns once the block's `beforeAll` has run: property reads go to it
 * (methods bound to it), so a test writes `redis.url` as it would with the started handle.
 */
export function startedLater<T extends object>(get: () => T | undefined, what: string): T {
  return new Proxy({} as T, {
    get(_, key) {
      const target = get();
      if (target === undefined) throw new Error(`the ${what} starts in beforeAll: use it inside a test or hook`);
      const value: unknown = Reflect.get(target, key);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** `start` before the block's tests (call it inside a `describe`, or at a file's top level), `stop` after. */
export function blockFixture<H extends object>(
  start: () => Promise<H>,
  stop: (h: H) => Promise<unknown>,
  what: string,
): H {
  let handle: H | undefined;
  beforeAll(async () => {
    handle = await start();
  });
  afterAll(async () => {
    if (handle !== undefined) await stop(handle);
  });
  return startedLater(() => handle, what);
}

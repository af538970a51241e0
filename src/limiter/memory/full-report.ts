/**
 * @module What a full memory store says (store.maxKeys): each refused request counted, and a warning at
 * most once per interval with the count since, so a flood of new keys cannot flood the log.
 */
import type { StoreLog, StoreObserver } from '../types.js';

const FULL_LOG_INTERVAL_MS = 10_000;

/** `role`: `memory store` or `local fallback`, for the line. */
export function fullReporter(
  observer: Partial<StoreObserver>,
  log: StoreLog | undefined,
  maxKeys: number,
  role: string,
  now: () => number = Date.now,
): (key: string) => void {
  let lastLogged = -Infinity;
  let unlogged = 0;
  return () => {
    observer.keysRefused?.();
    unlogged++;
    const t = now();
    if (t - lastLogged < FULL_LOG_INTERVAL_MS) return;
    log?.warn(
      { store: role, maxKeys, refused: unlogged },
      `${role} full (store.maxKeys ${maxKeys} buckets): requests that need a new bucket are refused 429 until buckets expire (keys the client chooses get 90 % of the room); ${unlogged} refused since the last such line`,
    );
    lastLogged = t;
    unlogged = 0;
  };
}

/**
 * @module A store call bounded by the timeout, without a promise of its own (the Redis store's hot calls).
 */
import { StoreTimeoutError, toStoreError, type StoreError } from '../errors.js';
import type { Topology } from './topology.js';

/**
 * One reaction per script call, not three: `p`'s reply goes to `answered`, or its failure or the
 * timeout (after `budgetMs`) to `failed`, whichever comes first and only that one; a late reply or
 * error is dropped. A failure other than a script error makes the topology look for a new master. The
 * handlers must not throw.
 */
export function settleCall<T>(
  p: Promise<T>,
  what: string,
  budgetMs: number,
  timeoutMs: number,
  topology: Pick<Topology, 'troubled'>,
  answered: (v: T) => void,
  failed: (err: StoreError) => void,
): void {
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    topology.troubled();
    failed(new StoreTimeoutError(timeoutMs, what));
  }, budgetMs);
  p.then(
    (v) => {
      clearTimeout(timer);
      if (!timedOut) answered(v);
    },
    (err: unknown) => {
      clearTimeout(timer);
      const e = toStoreError(err, what);
      if (e.reason !== 'script') topology.troubled();
      if (!timedOut) failed(e);
    },
  );
}

/** @module Typed failures of a remote store, so the fault policy and metrics can tell them apart. */

/** Why a store call failed: the `reason` label of `rategate_store_errors_total`. */
/** Why a store call failed: the `reason` labels of `rategate_store_errors_total` (with the breaker's `circuit_open`). */
export const STORE_ERROR_REASONS = ['timeout', 'connection', 'script'] as const;
export type StoreErrorReason = (typeof STORE_ERROR_REASONS)[number];

/** A store call that produced no decision. The fault policy (resilient.ts) turns it into one. */
export class StoreError extends Error {
  readonly code: string = 'STORE_ERROR';
  constructor(
    readonly reason: StoreErrorReason,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'StoreError';
  }
}

/** The store did not answer within `store.timeout`; its late answer, if any, is ignored. */
export class StoreTimeoutError extends StoreError {
  override readonly code = 'STORE_TIMEOUT';
  constructor(
    readonly timeoutMs: number,
    what: string,
  ) {
    super('timeout', `store ${what} took longer than ${timeoutMs} ms`);
    this.name = 'StoreTimeoutError';
  }
}

/**
 * Redis replies that mean "not available right now" rather than "the script is wrong": a cluster that
 * lost coverage, a server loading its dataset, a replica promoted mid-call.
 */
const UNAVAILABLE_REPLY = /^(CLUSTERDOWN|LOADING|MASTERDOWN|TRYAGAIN|READONLY|BUSY)\b/;

/** Maps whatever a Redis client threw to a StoreError with the right reason. */
export function toStoreError(err: unknown, what: string): StoreError {
  if (err instanceof StoreError) return err;
  const e = err instanceof Error ? err : new Error(String(err));
  // ioredis reports server error replies as ReplyError; everything else (socket closed, offline queue
  // disabled, retries exhausted, cluster not ready) is about reaching the server.
  const reason: StoreErrorReason =
    e.name === 'ReplyError' && !UNAVAILABLE_REPLY.test(e.message) ? 'script' : 'connection';
  return new StoreError(reason, `store ${what} failed: ${e.message}`, { cause: e });
}

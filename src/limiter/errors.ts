/** @module Typed failures of a remote store, so the fault policy and metrics can tell them apart. */
import { RategateError, type RategateErrorCode } from '../errors.js';

/**
 * Why a store call failed: the `reason` labels of `rategate_store_errors_total` (with the breaker's
 * `circuit_open`). `timeout`: no answer within store.timeout (a frozen or overloaded node); `connection`:
 * the node could not be reached; `readonly`: the node is a replica now (a demoted master); `clusterdown`:
 * the cluster lost slot coverage; `unavailable`: LOADING, MASTERDOWN, TRYAGAIN or BUSY (the node is
 * there but cannot serve yet); `script`: a reply the scripts did not expect (a bug, not an outage).
 */
export const STORE_ERROR_REASONS = [
  'timeout',
  'connection',
  'readonly',
  'clusterdown',
  'unavailable',
  'script',
] as const;
export type StoreErrorReason = (typeof STORE_ERROR_REASONS)[number];

/** A store call that produced no decision. The fault policy (resilient.ts) turns it into one. */
export class StoreError extends RategateError {
  readonly code: RategateErrorCode = 'STORE_ERROR';
  /**
   * For a request whose buckets span masters: the masters that failed or did not answer (the others
   * answered), so that only their breakers count the failure. Unset: every master of the request.
   */
  nodes: readonly string[] | undefined;
  constructor(
    readonly reason: StoreErrorReason,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
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
  }
}

/**
 * Redis replies that mean "not available right now" rather than "the script is wrong", by reason: a
 * demoted master, a cluster that lost coverage, a server loading its dataset or waiting for its master.
 */
const REPLY_REASONS: readonly (readonly [RegExp, StoreErrorReason])[] = [
  [/^READONLY\b/, 'readonly'],
  [/^CLUSTERDOWN\b/, 'clusterdown'],
  [/^(LOADING|MASTERDOWN|TRYAGAIN|BUSY)\b/, 'unavailable'],
];

/** Maps whatever a Redis client threw to a StoreError with the right reason. */
export function toStoreError(err: unknown, what: string): StoreError {
  if (err instanceof StoreError) return err;
  const e = err instanceof Error ? err : new Error(String(err));
  return new StoreError(errorReason(e), `store ${what} failed: ${e.message}`, { cause: e });
}

/**
 * ioredis reports server error replies as ReplyError; everything else (socket closed, offline queue
 * disabled, cluster not ready) is about reaching the server.
 */
function errorReason(e: Error): StoreErrorReason {
  for (const [re, reason] of REPLY_REASONS) if (re.test(e.message)) return reason;
  return e.name === 'ReplyError' ? 'script' : 'connection';
}

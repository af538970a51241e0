/** @module What one forwarded request came to (ForwardResult), and the upstream pool's own refusals among them (the per-client cap, the wait for a connection) with their answer. */
import type http from 'node:http';
import { respondError, type GatewayErrorCode } from '../http/errors.js';
import { declaresBody } from '../http/message.js';

/** What happened upstream, for metrics and logs. */
export interface ForwardResult {
  /** The upstream status, or the status the gateway answered with on failure; 0 when the client left first. */
  status: number;
  /** The gateway error code when the upstream failed. */
  error: GatewayErrorCode | 'CLIENT_ABORTED' | undefined;
  /** Seconds from sending the request to the upstream's response headers (or the failure). */
  seconds: number;
  /** The upstream answer's Content-Length as sent (the access log's `bytesOut`); absent when chunked. */
  bodyLength?: string | string[] | undefined;
}

/**
 * The pool's own refusals, before the upstream saw the request: the per-client cap (429) and the wait
 * for a connection (503). `send` writes neither: it reports the code to `done`, and the caller, which
 * charged the request's buckets, gives them back (a refused request charges nothing) and answers with
 * `answerPoolRefusal`.
 */
export type PoolRefusal = 'TOO_MANY_IN_FLIGHT' | 'UPSTREAM_BUSY';

export function isPoolRefusal(error: ForwardResult['error']): error is PoolRefusal {
  return error === 'TOO_MANY_IN_FLIGHT' || error === 'UPSTREAM_BUSY';
}

/**
 * The answer to a pool refusal, with the caller's `headers`: `Retry-After: 1` (a connection or the
 * client's share frees as soon as an exchange ends); a body still arriving is not read, the connection
 * closes after the answer.
 */
export function answerPoolRefusal(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  code: PoolRefusal,
  headers: readonly string[],
): void {
  if (res.destroyed || res.headersSent) return;
  respondError(res, code, [...headers, 'Retry-After', '1'], declaresBody(req) && !req.complete);
}

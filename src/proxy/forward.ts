/**
 * @module Forwarding to the upstream with an undici Pool: bodies streamed both ways, hop-by-hop headers
 * dropped, X-Forwarded-* set, timeouts, client aborts propagated, failures mapped to 502/504 (one exchange:
 * exchange.ts; the heads: upstream-request-headers.ts and client-response-headers.ts).
 */
import type http from 'node:http';
import { Pool } from 'undici';
import { UpstreamAdmission, type AdmissionLimits, type AdmissionObserver } from './admission.js';
import { Exchange, type ForwardRequest } from './exchange.js';
import type { ForwardResult } from './forward-result.js';

export type { ForwardRequest } from './exchange.js';
export { answerPoolRefusal, isPoolRefusal, type ForwardResult, type PoolRefusal } from './forward-result.js';
export { classifyUpstreamError } from './upstream-errors.js';
export { clientResponseHeaders } from './client-response-headers.js';

export interface ForwarderOptions {
  /** `http://host:port` of the upstream. */
  origin: string;
  /** Waiting for the upstream's headers, and for each chunk of its body. */
  timeoutMs: number;
  connectTimeoutMs: number;
  /** `upstream.host: client`: the client's Host is forwarded unchanged (else the upstream's own). */
  clientHost?: boolean;
  /** Upstream connections kept open (keep-alive); more requests wait in line (admission.ts). */
  connections?: number;
  /** Read per request: how long a request may wait for a connection, and the per-client cap (`server.*`). */
  admission?: () => AdmissionLimits;
  observer?: AdmissionObserver;
}

export class Forwarder {
  readonly pool: Pool;
  /** `http://host:port` of the upstream (the upstream span's url.full). */
  readonly origin: string;
  readonly admission: UpstreamAdmission;
  readonly clientHost: boolean;

  constructor(opts: ForwarderOptions) {
    this.clientHost = opts.clientHost === true;
    this.origin = opts.origin;
    const connections = opts.connections ?? 128;
    this.pool = new Pool(opts.origin, {
      connections,
      pipelining: 1,
      connect: { timeout: opts.connectTimeoutMs },
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
      keepAliveTimeout: 4_000,
    });
    this.admission = new UpstreamAdmission(connections, opts.admission, opts.observer);
  }

  /**
   * Sends `req` to the upstream at `pathAndQuery` and streams the answer to `res`, adding `extraHeaders`
   * (flat name/value pairs: the rate-limit headers). Calls `done` once, when the response headers were
   * written or the failure was answered, or with a pool refusal (`isPoolRefusal`, whether or not the
   * client is still there) left for `done` to answer: a callback, so the request path takes no promise hop. `done` must not throw (undici calls
   * it from its parser's callbacks).
   *
   * The exchange is its own undici dispatch handler: the upstream body is written straight into `res`
   * with backpressure (no intermediate Readable, no `stream.pipeline` and its per-call AbortController),
   * and it ends exactly once whatever fails in which order. undici's own stream handler does not: a
   * request body that fails after the upstream answered reached its `onError` twice and threw inside
   * undici, ending the process (issue 18).
   */
  send(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    out: ForwardRequest,
    done: (r: ForwardResult) => void,
  ): void {
    new Exchange(this, req, res, out, done).start();
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

/**
 * @module One exchange with the upstream, as its own undici dispatch handler: in line for a connection,
 * the request body streamed up, the answer streamed to the client, every failure answered once.
 */
// The module's binding, not the global: globalThis.performance is a getter, called on every use.
import { performance } from 'node:perf_hooks';
import type http from 'node:http';
import type { Readable } from 'node:stream';
import type { Dispatcher, Pool } from 'undici';
import type { ForwardedHeaders } from './client-ip-headers.js';
import { upstreamBody, type BodyOwner } from './upstream-body.js';
import { GATEWAY_ERRORS, isClientFault, respondError, type GatewayErrorCode } from '../http/errors.js';
import { declaresBody } from '../http/message.js';
import { forwardingBody } from '../http/body-rate.js';
import type { UpstreamAdmission, Waiter } from './admission.js';
import { isPoolRefusal, type ForwardResult } from './forward-result.js';
import { upstreamRequestHeaders } from './upstream-request-headers.js';
import { clientResponseHeaders } from './client-response-headers.js';
import { classifyUpstreamError, clientFault } from './upstream-errors.js';

/** What the pipeline decided about one forwarded request. */
export interface ForwardRequest {
  /** The normalized path and the query. */
  readonly pathAndQuery: string;
  readonly forwarded: ForwardedHeaders;
  /** Flat name/value pairs added to the client's response: the rate-limit headers. */
  readonly extraHeaders: readonly string[];
  /** A rule matched: the gateway's rate-limit headers are merged with any the upstream sent (upstream-limits.ts). */
  readonly dropUpstreamRateLimitHeaders: boolean;
  /** Largest body for the route (a chunked body is cut past it); Infinity for none. */
  readonly maxBodySize: number;
  /** The body to send after a peek (the held bytes, then the rest); null: the request itself. */
  readonly body: Readable | null;
  /** X-HTTP-Method-Override is not what Rails routes by: not forwarded. */
  readonly dropOverrideHeader: boolean;
  /** The client's IP key (an IPv6 client's network): what the per-client cap of upstream connections counts. */
  readonly clientKey: string;
  /**
   * The gateway's `traceparent` (and `tracestate`) as name/value pairs, sent instead of the client's:
   * the upstream's spans are children of the gateway's. Null: tracing is off, the client's pass through.
   */
  readonly trace: readonly string[] | null;
}

/** What an exchange uses of its Forwarder (forward.ts): the pool, its admission, the Host setting. */
export interface ExchangeUpstream {
  readonly pool: Pool;
  readonly admission: UpstreamAdmission;
  readonly clientHost: boolean;
}

/**
 * One exchange with the upstream: first in line for a connection (admission.ts), then undici's handler
 * for it. Completion is idempotent: the client's answer is settled once (`ended`), whichever of the
 * upstream, the request body, the client and the wait fails first, and callbacks after it (undici may
 * report an error after the response ended) change nothing; the connection and the client's count are
 * each given back exactly once (`settle`).
 */
export class Exchange implements Dispatcher.DispatchHandler, Waiter, BodyOwner {
  /** The upstream's status once its headers arrived; 0 before. */
  status = 0;
  upload: boolean;
  prevWaiter: Waiter | null = null;
  nextWaiter: Waiter | null = null;
  waitTimer: NodeJS.Timeout | null = null;
  waitOrder = 0;
  private ended = false;
  /** The client went away before the upstream was reached: abort as soon as undici gives a handle. */
  private aborted = false;
  /** Given to undici: from then on its own handler sees the body's errors. */
  private dispatched = false;
  /** Holds one of the pool's connections (from the admission), and counts for its client: each given back once. */
  private holding = false;
  private counted = false;
  private body: Readable | null = null;
  private controller: Dispatcher.DispatchController | null = null;
  private readonly started = performance.now();
  /** The client went away: stop the upstream work for nobody (before or during the answer). */
  readonly onClose = (): void => {
    if (this.ended) return;
    this.aborted = true;
    if (this.dispatched) this.controller?.abort(CLIENT_GONE);
    else this.refuse(null);
  };
  /** Made on the first backpressure only: a plain answer that never fills the socket costs no closure. */
  private onDrain: (() => void) | null = null;

  constructor(
    private readonly forwarder: ExchangeUpstream,
    private readonly req: http.IncomingMessage,
    readonly res: http.ServerResponse,
    private readonly out: ForwardRequest,
    readonly resolve: (r: ForwardResult) => void,
  ) {
    this.upload = declaresBody(req) && !req.complete;
  }

  start(): void {
    const { admission } = this.forwarder;
    const entered = admission.enter(this.out.clientKey);
    if (entered === 'refused') return this.refuse('TOO_MANY_IN_FLIGHT');
    // Counted under the cap in force now: a reload that changes the cap never unbalances the count.
    this.counted = entered === 'counted';
    const { req, out } = this;
    if (declaresBody(req)) {
      // A declared length was checked before; a chunked body is counted as it streams. Its errors are
      // heard from the start: while the request waits for a connection, undici does not listen yet.
      const max = req.headers['content-length'] === undefined ? out.maxBodySize : Infinity;
      this.body = upstreamBody(out.body ?? req, max, this);
      forwardingBody(req, this.body);
    }
    this.res.once('close', this.onClose);
    if (admission.acquire(this)) this.admitted();
  }

  /** A connection is this exchange's: hand it to undici. */
  admitted(): void {
    this.holding = true;
    this.dispatched = true;
    const { req, out } = this;
    this.forwarder.pool.dispatch(
      {
        path: out.pathAndQuery,
        method: req.method as 'GET',
        headers: upstreamRequestHeaders(
          req,
          out.forwarded,
          this.body !== null,
          out.dropOverrideHeader,
          this.forwarder.clientHost,
          out.trace,
        ),
        body: this.body,
      },
      this,
    );
  }

  /** No connection came free in time. */
  expired(): void {
    this.refuse('UPSTREAM_BUSY');
  }

  /** The body failed (too large, too slow, a refused field, the client gone). Once dispatched, undici's handler hears it too and ends the exchange. */
  bodyFailed(err: Error): void {
    if (!this.dispatched) this.refuse(clientFault(err) ?? null);
  }

  bodyReceived(): void {
    this.forwarder.admission.bodyArrived(this, this.holding);
  }

  /** Answers `code` without the upstream (null: the client left, nothing to write). Before dispatch only. */
  private refuse(code: GatewayErrorCode | null): void {
    if (this.ended) return;
    this.ended = true;
    const { res } = this;
    res.off('close', this.onClose);
    this.forwarder.admission.cancel(this);
    this.body?.destroy();
    this.settle();
    const seconds = (performance.now() - this.started) / 1000;
    // The pool's refusals are the caller's to answer (it gives the request's charge back first), also
    // to a client already gone: the pool refused it all the same.
    if (code !== null && isPoolRefusal(code))
      return this.resolve({ status: GATEWAY_ERRORS[code].status, error: code, seconds });
    if (code === null || res.destroyed) return this.resolve({ status: 0, error: 'CLIENT_ABORTED', seconds });
    // A body still arriving is not read to its end: the connection closes after the answer.
    respondError(res, code, this.out.extraHeaders, declaresBody(this.req) && !this.req.complete);
    this.resolve({ status: GATEWAY_ERRORS[code].status, error: code, seconds });
  }

  /** Gives back the connection and the client's count, each once. */
  private settle(): void {
    const { admission } = this.forwarder;
    if (this.holding) {
      this.holding = false;
      admission.release(this.upload);
    }
    if (this.counted) {
      this.counted = false;
      admission.leave(this.out.clientKey);
    }
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.aborted) controller.abort(CLIENT_GONE);
  }

  /** Upstream headers arrived: write the client's head. */
  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    if (statusCode < 200 || this.ended || this.status !== 0) return; // 1xx: the client's own 100 was the gateway's
    const { res } = this;
    this.status = statusCode;
    const seconds = (performance.now() - this.started) / 1000;
    if (res.destroyed) {
      this.resolve({ status: 0, error: 'CLIENT_ABORTED', seconds });
      controller.abort(CLIENT_GONE);
      return;
    }
    const out = clientResponseHeaders(
      statusCode,
      headers,
      this.out.dropUpstreamRateLimitHeaders,
      this.out.extraHeaders,
    );
    res.writeHead(statusCode, out);
    this.resolve({ status: statusCode, error: undefined, seconds, bodyLength: headers['content-length'] });
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.ended || this.res.write(chunk)) return;
    controller.pause();
    if (this.onDrain === null) {
      this.onDrain = () => this.controller?.resume();
      this.res.on('drain', this.onDrain);
    }
  }

  onResponseEnd(): void {
    if (this.ended) return;
    this.ended = true;
    this.res.off('close', this.onClose);
    if (this.onDrain !== null) this.res.off('drain', this.onDrain);
    this.res.end();
    this.settle();
  }

  /** A failure before the head is answered; after it, the connection is cut. */
  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    this.settle();
    if (this.ended) return;
    this.ended = true;
    const { res } = this;
    res.off('close', this.onClose);
    if (this.onDrain !== null) res.off('drain', this.onDrain);
    if (this.status !== 0) {
      // Reset mid-body: the status is already sent, so the only honest signal is to cut the connection.
      res.destroy();
      return;
    }
    const seconds = (performance.now() - this.started) / 1000;
    if (this.aborted || res.destroyed) return this.resolve({ status: 0, error: 'CLIENT_ABORTED', seconds });
    const code = clientFault(err) ?? classifyUpstreamError(err);
    if (res.headersSent) res.destroy();
    // After a refused body, close rather than read the rest of it.
    else respondError(res, code, this.out.extraHeaders, isClientFault(code));
    this.resolve({ status: GATEWAY_ERRORS[code].status, error: code, seconds });
  }
}

/** The reason an exchange is aborted for a client that left (never shown to anyone). */
const CLIENT_GONE = new Error('client closed the connection');

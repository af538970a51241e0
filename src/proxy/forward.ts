/**
 * @module Forwarding to the upstream with an undici Pool: bodies streamed both ways, hop-by-hop headers
 * dropped, X-Forwarded-* set, timeouts, client aborts propagated, failures mapped to 502/504.
 */
// The module's binding, not the global: globalThis.performance is a getter, called on every use.
import { performance } from 'node:perf_hooks';
import type http from 'node:http';
import type { Readable } from 'node:stream';
import { Pool, errors as undiciErrors, type Dispatcher } from 'undici';
import { connectionListed, HOP_BY_HOP, isHopByHop, isRateLimitHeader } from './hop-by-hop.js';
import { CLIENT_IP_CLAIMS, REBUILT_HEADERS, SCHEME_CLAIMS, type ForwardedHeaders } from './client-ip-headers.js';
import { rackSpelling } from '../http/header-spelling.js';
import { upstreamBody, type BodyOwner } from './upstream-body.js';
import { hasCode } from '../errors.js';
import { GATEWAY_ERRORS, isClientFault, respondError, type GatewayErrorCode } from '../http/errors.js';
import { mergeUpstreamLimits } from './upstream-limits.js';
import { declaresBody } from '../http/message.js';
import { forwardingBody } from '../http/body-rate.js';
import { UpstreamAdmission, type AdmissionLimits, type AdmissionObserver, type Waiter } from './admission.js';

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

/**
 * One exchange with the upstream: first in line for a connection (admission.ts), then undici's handler
 * for it. Completion is idempotent: the client's answer is settled once (`ended`), whichever of the
 * upstream, the request body, the client and the wait fails first, and callbacks after it (undici may
 * report an error after the response ended) change nothing; the connection and the client's count are
 * each given back exactly once (`settle`).
 */
class Exchange implements Dispatcher.DispatchHandler, Waiter, BodyOwner {
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
    private readonly forwarder: Forwarder,
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

/** The request body itself failed while streaming: too large, too slow, or a counted field after a file part. */
function clientFault(err: Error): GatewayErrorCode | undefined {
  if (hasCode(err, 'BODY_TOO_LARGE')) return 'PAYLOAD_TOO_LARGE';
  if (hasCode(err, 'BODY_TOO_SLOW')) return 'BODY_TOO_SLOW';
  // body-peek's ParamBeyondPeekError, known by its stable code: proxy/ does not import rails/.
  if (hasCode(err, 'PARAM_BEYOND_PEEK')) return 'PARAM_AFTER_FILE';
  return undefined;
}

/** One place that turns undici and socket failures into gateway errors. */
export function classifyUpstreamError(err: unknown): GatewayErrorCode {
  if (
    err instanceof undiciErrors.ConnectTimeoutError ||
    err instanceof undiciErrors.HeadersTimeoutError ||
    err instanceof undiciErrors.BodyTimeoutError
  ) {
    return 'UPSTREAM_TIMEOUT';
  }
  if (err instanceof undiciErrors.RequestContentLengthMismatchError) return 'BAD_REQUEST';
  const code = (err as { code?: string }).code;
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || code === 'EPIPE') return 'UPSTREAM_RESET';
  return 'UPSTREAM_UNREACHABLE';
}

/**
 * What a request header is to the upstream copy, by lower-case name folded as Puma folds it (`_` =
 * `-`, http/header-spelling.ts): one look-up per header; absent: copied.
 */
const HOP = 1 << 0;
/** Host (the upstream's, unless `clientHost`), X-Request-Id (replaced), Expect (answered by the gateway: undici refuses to send it). */
const REBUILT = 1 << 1;
const HOST = 1 << 2;
/** X-Forwarded-* and Forwarded: rebuilt by the gateway (client-ip-headers.ts). */
const FORWARDING = 1 << 3;
/** Client-IP and scheme claims other than those: passed from a trusted proxy only. */
const CLAIM = 1 << 4;
const CONTENT_LENGTH = 1 << 5;
const METHOD_OVERRIDE = 1 << 6;
/** traceparent, tracestate: replaced by the gateway's when tracing is on (the client's is their parent). */
const TRACE = 1 << 7;
const SPECIAL: ReadonlyMap<string, number> = (() => {
  const m = new Map<string, number>();
  const add = (name: string, flag: number) => m.set(name, (m.get(name) ?? 0) | flag);
  for (const n of HOP_BY_HOP) add(n, HOP);
  for (const n of ['host', 'x-request-id', 'expect']) add(n, REBUILT);
  add('host', HOST);
  for (const n of REBUILT_HEADERS) add(n, FORWARDING);
  for (const n of CLIENT_IP_CLAIMS) add(n, CLAIM);
  for (const n of SCHEME_CLAIMS) add(n, CLAIM);
  add('content-length', CONTENT_LENGTH);
  add('x-http-method-override', METHOD_OVERRIDE);
  for (const n of ['traceparent', 'tracestate']) add(n, TRACE);
  return m;
})();

/**
 * Length and first letter (lower-cased) of each SPECIAL name: a header whose shape is not here is none
 * of them, and is copied without a lower-cased copy of its name and a map look-up (most headers). An
 * underscore spelling has the same shape (folding keeps the length; every SPECIAL name starts with a
 * letter, which `_` never replaces), so it always takes the slow path.
 */
const SPECIAL_SHAPES: ReadonlySet<number> = new Set([...SPECIAL.keys()].map(shapeOf));

/** A header name's length and its first character with bit 0x20 set (lower case for a letter). */
function shapeOf(name: string): number {
  return name.length === 0 ? 0 : (name.length << 7) | (name.charCodeAt(0) | 0x20);
}

function upstreamRequestHeaders(
  req: http.IncomingMessage,
  forwarded: ForwardedHeaders,
  hasBody: boolean,
  dropOverrideHeader: boolean,
  clientHost: boolean,
  trace: readonly string[] | null,
): string[] {
  const raw = req.rawHeaders;
  const listed = connectionListed(req.headers.connection);
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (listed === null && !SPECIAL_SHAPES.has(shapeOf(name))) {
      out.push(name, raw[i + 1]!);
      continue;
    }
    const lower = name.toLowerCase();
    const folded = rackSpelling(lower);
    const f = SPECIAL.get(folded);
    if (
      f !== undefined &&
      !copied(f, forwarded.trusted, hasBody, dropOverrideHeader, clientHost, folded !== lower, trace !== null)
    )
      continue;
    if (listed !== null && listed.has(folded)) continue;
    out.push(name, raw[i + 1]!);
  }
  out.push(
    'x-forwarded-for',
    forwarded.for,
    'x-forwarded-proto',
    forwarded.proto,
    'x-forwarded-host',
    forwarded.host,
    'x-forwarded-port',
    forwarded.port,
    'x-forwarded-ssl',
    forwarded.ssl,
    'x-request-id',
    forwarded.requestId,
  );
  if (forwarded.forwarded !== undefined) out.push('forwarded', forwarded.forwarded);
  if (trace !== null) for (const h of trace) out.push(h);
  return out;
}

/**
 * Whether a request header with these SPECIAL flags goes upstream as it is. Host is the upstream's
 * (undici sets it; `clientHost`: the client's, kept); the client's also goes in X-Forwarded-Host.
 * Security: an `underscored` spelling of a special name is dropped, but for a claim a trusted proxy
 * passes: the gateway reads only the dashed spelling (the method override, Content-Length), and Puma
 * would read the other as the same header, so the app could see a value the gateway never judged.
 */
function copied(
  f: number,
  trusted: boolean,
  hasBody: boolean,
  dropOverrideHeader: boolean,
  clientHost: boolean,
  underscored: boolean,
  traced: boolean,
): boolean {
  if ((f & (HOP | FORWARDING)) !== 0) return false;
  if ((f & TRACE) !== 0) return !traced;
  if (underscored) return (f & CLAIM) !== 0 && trusted;
  if ((f & REBUILT) !== 0 && !(clientHost && (f & HOST) !== 0)) return false;
  if ((f & CLAIM) !== 0 && !trusted) return false;
  if ((f & CONTENT_LENGTH) !== 0 && !hasBody) return false;
  return !((f & METHOD_OVERRIDE) !== 0 && dropOverrideHeader);
}

/**
 * The upstream's head for the client, with the gateway's rate-limit headers (`extra`). On a matched route
 * (`merge`) the upstream's own rate-limit headers are set aside and merged (upstream-limits.ts); the
 * common case, an upstream that sends none, costs nothing more than appending the gateway's.
 */
export function clientResponseHeaders(
  status: number,
  headers: Record<string, string | string[] | undefined>,
  merge: boolean,
  extra: readonly string[],
): string[] {
  const listed = connectionListed(headers.connection);
  const out: string[] = [];
  let upstreamLimits: string[] | null = null;
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || isHopByHop(name, listed)) continue;
    if (merge && isRateLimitHeader(name)) {
      upstreamLimits ??= [];
      upstreamLimits.push(name, Array.isArray(value) ? value.join(', ') : value);
      continue;
    }
    if (Array.isArray(value)) for (const v of value) out.push(name, v);
    else out.push(name, value);
  }
  if (merge && (upstreamLimits !== null || status === 429)) {
    mergeUpstreamLimits(out, status, upstreamLimits ?? [], extra, headers['retry-after'] !== undefined, Date.now());
  } else for (const h of extra) out.push(h);
  return out;
}

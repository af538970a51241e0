/**
 * @module The request pipeline, one for plain requests and WebSocket upgrades alike: drain check →
 * normalize → body-size check → decide (identify, match, consume) → then one of two endings, forward
 * (undici) or tunnel (upgrade), each closed by one `finish()` that records the response metric and the
 * access-log line. The rate-limit headers go on every answer of a matched request, a 101 included.
 */
// The module's binding, not the global: globalThis.performance is a getter, called on every use.
import { performance } from 'node:perf_hooks';
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { answerPoolRefusal, isPoolRefusal, type ForwardResult } from '../proxy/forward.js';
import { declaresBody, requestId } from '../http/message.js';
import { forwardedHeaders } from '../proxy/client-ip-headers.js';
import {
  GATEWAY_ERRORS,
  isGatewayAnswer,
  respondError,
  respondJson,
  respondOnSocket,
  respondWithHead,
  upstreamErrorReason,
} from '../http/errors.js';
import { NO_HEADERS } from './decision.js';
import { RequestView } from './request-view.js';
import { connectionMemoOf } from '../identity/connection-memo.js';
import { continueNow } from '../http/expect-continue.js';
import { settleSocketShape } from '../http/socket-shape.js';
import type { Release } from '../guard/slots.js';
import { protocolOf, recordOf } from './access-record.js';
import { loggedPath } from '../observability/log-redact.js';
import { refundRefused } from './refund.js';
import type { Stage } from './drive.js';
import { CONNECTION_FRAMING, SHUTTING_DOWN, TOO_LARGE } from './head-stage.js';
import { screen, screened, STAGES, type Ending, type ScreenContext, type Screened } from './screen.js';
import type { GatewayOptions } from './gateway-options.js';
import { endingError, tracedEnding, type Outcome } from './exchange-end.js';

export type { RequestRecord } from './access-record.js';
export type { GatewayOptions } from './gateway-options.js';

export class Gateway {
  /** The options, as the socket-free stages (screen.ts) read them. */
  private readonly ctx: ScreenContext;
  private readonly stages: readonly Stage[];

  constructor(private readonly opts: GatewayOptions) {
    this.ctx = opts;
    this.stages = opts.stages ?? STAGES;
  }

  /**
   * Also node:http's 'checkContinue' listener: a request with `Expect: 100-continue` gets its
   * `100 Continue` from the gateway once admitted (or before its body is read for the decision), so a
   * refused client never sends its body.
   */
  readonly handle = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const started = performance.now();
    // One id per request: forwarded upstream, and on its access-log line however the exchange ends.
    const id = requestId(req);
    this.opts.bodyRate?.watch(req, res);
    // No promise unless a stage waited: a request decided without I/O is forwarded in this same turn.
    const view = this.viewOf(req, started);
    const exchange = new PlainExchange(this, req, res, id, started, view);
    try {
      void screen(this.ctx, view, req, res, exchange, this.stages);
    } catch (err) {
      this.failed(req, res, id, err, started, view);
    }
  };

  readonly handleUpgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer): void => {
    const started = performance.now();
    const id = requestId(req);
    this.opts.tunnel.track(socket);
    this.tunnel(req, socket, head, id, started).catch((err: unknown) => {
      socket.destroy();
      this.logFailure(req, id, err, started);
    });
  };

  /** Closes every open tunnel (the last step of a drain: upgraded sockets have no natural end). */
  closeTunnels(): void {
    this.opts.tunnel.closeAll();
    this.opts.routes?.closeTunnels();
  }

  /** The ending of a screened request: its refusal written, or the exchange with the upstream. Never throws (PlainExchange's). */
  conclude(req: http.IncomingMessage, res: http.ServerResponse, id: string, started: number, s: Screened): void {
    try {
      const d = s.decision;
      // Answered while the stages ran: a body too slow (http/body-rate.ts).
      if (res.headersSent) return this.finish(req, id, s, { status: res.statusCode, result: undefined }, started);
      if (!d.admit) {
        // A request body the gateway will not read: answering early closes the connection, not drains it.
        const close =
          d === SHUTTING_DOWN || d === TOO_LARGE || d === CONNECTION_FRAMING || (!req.complete && declaresBody(req));
        // A 429's prebuilt head (refusal-head.ts) is written as is; one that closes the connection is built.
        if (d.head !== undefined && !close) respondWithHead(res, d.status, d.head, d.body!);
        else respondJson(res, d.status, d.body!, d.headers, close);
        return this.finish(req, id, s, { status: d.status, result: undefined, body: d.body }, started);
      }
      // Routed by the method it was counted as (Rack's override applied), as the upstream's Rails routes it.
      const forwarder = this.opts.routes?.pick(s.view.method, s.view.path)?.forwarder ?? this.opts.forwarder;
      const forwarded = forwardedHeaders(req, s.view.peer, id, s.view);
      const span = s.view.span;
      continueNow(req, res);
      const out = {
        pathAndQuery: s.target,
        forwarded,
        extraHeaders: d.headers,
        dropUpstreamRateLimitHeaders: d.matched,
        maxBodySize: s.maxBody,
        body: s.body,
        dropOverrideHeader: s.dropOverrideHeader,
        clientKey: s.view.client.key,
        trace:
          span !== null
            ? span.upstreamHeaders(req.method ?? 'GET', forwarder.origin, s.view.path, performance.now())
            : null,
      };
      forwarder.send(req, res, out, (result) => this.forwarded(req, res, id, started, s, result));
    } catch (err) {
      this.failed(req, res, id, err, started, s.view);
    }
  }

  /** The upstream's answer is on its way to the client (or the exchange failed): recorded, never thrown from (undici calls this). */
  private forwarded(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    id: string,
    started: number,
    s: Screened,
    result: ForwardResult,
  ): void {
    try {
      if (s.view.span !== null) s.view.span.upstreamDone(result, performance.now());
      // The pool refused it before the upstream saw it: its buckets are given back, then it is answered
      // (a client gone meanwhile is recorded as gone).
      if (result.error !== undefined && isPoolRefusal(result.error)) {
        const gone = res.destroyed;
        answerPoolRefusal(req, res, result.error, refundRefused(this.opts.store, s, result.error));
        if (gone)
          return this.finish(
            req,
            id,
            s,
            { status: 0, result: { status: 0, error: 'CLIENT_ABORTED', seconds: result.seconds } },
            started,
          );
      }
      this.finish(req, id, s, { status: result.status, result }, started);
    } catch (err) {
      this.failed(req, res, id, err, started, s.view);
    }
  }

  /** A bug must cost one request, never the process. */
  failed(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    id: string,
    err: unknown,
    started: number,
    view: RequestView,
  ): void {
    if (!res.headersSent) respondError(res, 'INTERNAL', NO_HEADERS);
    else res.destroy();
    if (view.span !== null) view.span.failed(err, performance.now());
    this.logFailure(req, id, err, started);
  }

  private async tunnel(
    req: http.IncomingMessage,
    socket: Duplex,
    head: Buffer,
    id: string,
    started: number,
  ): Promise<void> {
    const held = (release: Release): unknown => (socket.destroyed ? release() : socket.once('close', release));
    const s = await screened(this.ctx, this.viewOf(req, started), null, held, this.stages);
    const d = s.decision;
    if (!d.admit) {
      respondOnSocket(socket, d.status, d.body!, d.headers);
      return this.finish(req, id, s, { status: d.status, result: undefined, body: d.body }, started);
    }
    const tunnel = this.opts.routes?.pick(s.view.method, s.view.path)?.tunnel ?? this.opts.tunnel;
    const span = s.view.span;
    const trace =
      span !== null ? span.upstreamHeaders(req.method ?? 'GET', tunnel.origin, s.view.path, performance.now()) : null;
    const result = await tunnel.open(
      req,
      socket,
      head,
      s.target,
      forwardedHeaders(req, s.view.peer, id, s.view),
      d.headers,
      d.matched,
      trace,
    );
    if (span !== null) span.upstreamDone(result, performance.now());
    this.finish(req, id, s, { status: result.status, result }, started);
  }

  /**
   * The request as the stages read it, with the policy snapshot read once (and its server span, when
   * tracing); the peer and the token's checks are its connection's (identity/connection-memo.ts).
   */
  private viewOf(req: http.IncomingMessage, started: number): RequestView {
    const policy = this.opts.policy();
    const conn = connectionMemoOf(req);
    settleSocketShape(req);
    const peer = conn.peer(policy.resolveIp.peer, req.socket);
    const v = new RequestView(req, policy, peer, undefined, conn);
    if (this.opts.tracing !== undefined) v.span = this.opts.tracing.start(req, started);
    return v;
  }

  /** The one place a request's answer is recorded: the response metrics and the access-log line. */
  private finish(req: http.IncomingMessage, id: string, s: Screened, end: Outcome, started: number): void {
    const r = end.result;
    const error = endingError(r, this.opts.drain);
    // The duration ends here, for the access-log line and the latency histogram alike.
    const elapsedMs = performance.now() - started;
    this.opts.metrics.observeResponse(end.status, s.decision.kind, elapsedMs / 1000);
    const record =
      this.opts.onRequest !== undefined && this.opts.wantsRecords?.() !== false
        ? recordOf(
            req,
            id,
            s.view,
            s.decision,
            { status: end.status, error, bodyLength: end.body?.length ?? r?.bodyLength },
            elapsedMs,
          )
        : undefined;
    if (s.banHits && this.opts.guard) this.opts.guard.bans.countHits(s.banHits, end.status);
    // A surge's trigger counts the upstream's own answers to what was admitted (surge/surges.ts: by status,
    // per network; no wait, no store call unless a trigger rule counted it). A gateway answer never counts.
    if (s.decision.kind === 'allowed' && r !== undefined && r.error === undefined)
      this.opts.guard?.surges?.answered(s.decision.rules, r.status, s.view.client.address);
    const { metrics } = this.opts;
    if (r === undefined) metrics.gatewayAnswered(end.status);
    else if (r.error === undefined) metrics.observeUpstream(r.status, r.seconds);
    else if (error === 'DRAIN_TIMEOUT') metrics.drainCuts.inc();
    else if (r.error !== 'CLIENT_ABORTED' && isGatewayAnswer(r.error)) metrics.gatewayAnswered(r.status);
    else if (r.error !== 'CLIENT_ABORTED') {
      metrics.upstreamErrors.labels(upstreamErrorReason(r.error)).inc();
      metrics.gatewayAnswered(r.status);
    }
    if (record !== undefined) this.opts.onRequest!(record);
    if (s.view.span !== null) s.view.span.end(tracedEnding(s, end.status, error), performance.now());
  }

  private logFailure(req: http.IncomingMessage, id: string, err: unknown, started: number): void {
    const elapsedMs = performance.now() - started;
    this.opts.metrics.gatewayAnswered(GATEWAY_ERRORS.INTERNAL.status);
    this.opts.metrics.observeResponse(GATEWAY_ERRORS.INTERNAL.status, 'rejected', elapsedMs / 1000);
    this.opts.onRequest?.({
      id,
      method: req.method ?? '',
      path: loggedPath(req.url ?? ''),
      protocol: protocolOf(req),
      status: GATEWAY_ERRORS.INTERNAL.status,
      rules: [],
      decision: 'rejected',
      ms: Math.round(elapsedMs * 1000) / 1000,
      error: err instanceof Error ? err.message : String(err),
    });
  }
}

/** A plain request's exchange as the stages' ending: told the screened request (or a stage's throw), and each slot it holds. */
class PlainExchange implements Ending {
  constructor(
    private readonly gateway: Gateway,
    private readonly req: http.IncomingMessage,
    private readonly res: http.ServerResponse,
    private readonly id: string,
    private readonly started: number,
    private readonly view: RequestView,
  ) {}

  screened(s: Screened): void {
    this.gateway.conclude(this.req, this.res, this.id, this.started, s);
  }

  failed(err: unknown): void {
    this.gateway.failed(this.req, this.res, this.id, err, this.started, this.view);
  }

  /** Runs `release` when the exchange ends, however it ends: answered, aborted, or already over. */
  held(release: Release): void {
    const { res, req } = this;
    if (res.writableFinished || res.destroyed || req.socket.destroyed) release();
    else res.once('close', release);
  }
}

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
import type { Store } from '../limiter/types.js';
import type { Metrics } from '../observability/metrics.js';
import { answerPoolRefusal, isPoolRefusal, type Forwarder, type ForwardResult } from '../proxy/forward.js';
import { declaresBody, requestId } from '../http/message.js';
import { forwardedHeaders } from '../proxy/client-ip-headers.js';
import type { Tunnel } from '../proxy/tunnel.js';
import type { UpstreamRoutes } from '../proxy/routes.js';
import type { BodyRateWatch } from '../http/body-rate.js';
import { GATEWAY_ERRORS, isGatewayAnswer, respondError, respondJson, respondOnSocket, respondWithHead, upstreamErrorReason } from '../http/errors.js';
import { NO_HEADERS } from './decision.js';
import { RequestView } from './request-view.js';
import { continueNow } from '../http/expect-continue.js';
import type { RequestPolicy } from './policy.js';
import type { Guard } from '../guard/guard.js';
import { countBans, whenDone } from './guard-stage.js';
import { protocolOf, recordOf, type RequestRecord } from './access-record.js';
import { loggedPath } from '../observability/log-redact.js';
import { refundRefused } from './refund.js';
import { CONNECTION_FRAMING, screen, SHUTTING_DOWN, TOO_LARGE, type ScreenContext, type Screened } from './screen.js';

export type { RequestRecord } from './access-record.js';

export interface GatewayOptions {
  policy: () => RequestPolicy;
  store: Store;
  forwarder: Forwarder;
  tunnel: Tunnel;
  /** `routes:` to named upstreams; null or absent: everything goes to `forwarder` / `tunnel`. */
  routes?: UpstreamRoutes | null;
  metrics: Metrics;
  /** The store's clock (epoch ms), as near as the gateway knows it. */
  now: () => number;
  /** Called once per request when its answer has been decided (the access log). */
  onRequest?: (record: RequestRecord) => void;
  /** Whether onRequest wants records now: when not, none is built (the access log level may be off). */
  wantsRecords?: () => boolean;
  /** Runtime blocks, exemptions, bans and in-flight slots (absent: none of them). */
  guard?: Guard;
  runtimeExempt?: (address: string) => boolean;
  onLimited?: (rule: string, bucketKey: string) => void;
  /**
   * The listener's drain (http/drain.ts): `draining`, the one flag that says new requests are answered
   * 503; `cut`, that the grace period ran out and the gateway itself is closing what is left.
   */
  drain?: { readonly draining: boolean; readonly cut?: boolean };
  /** `server.minBodyRate`: every request body is watched until it has arrived (absent: none is). */
  bodyRate?: BodyRateWatch;
}

/** How an exchange ended, for `finish()`: a gateway answer carries no `result`. */
interface Ending {
  readonly status: number;
  readonly result: ForwardResult | undefined;
  /** The gateway's own answer's body, when it wrote one (the access log's `bytesOut`). */
  readonly body?: Buffer | undefined;
}

export class Gateway {
  /** The options, as the socket-free stages (screen.ts) read them. */
  private readonly ctx: ScreenContext;

  constructor(private readonly opts: GatewayOptions) {
    this.ctx = opts;
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
    try {
      const screened = screen(this.ctx, this.viewOf(req), req, res, (release) => whenDone(res, req, release));
      if (!(screened instanceof Promise)) return this.conclude(req, res, id, started, screened);
      screened.then(
        (s) => this.conclude(req, res, id, started, s),
        (err: unknown) => this.failed(req, res, id, err, started),
      );
    } catch (err) {
      this.failed(req, res, id, err, started);
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

  /** The ending of a screened request: its refusal written, or the exchange with the upstream. Never throws. */
  private conclude(req: http.IncomingMessage, res: http.ServerResponse, id: string, started: number, s: Screened): void {
    try {
      const d = s.decision;
      // Answered while the stages ran: a body too slow (http/body-rate.ts).
      if (res.headersSent) return this.finish(req, id, s, { status: res.statusCode, result: undefined }, started);
      if (!d.admit) {
        // A request body the gateway will not read: answering early closes the connection, not drains it.
        const close = d === SHUTTING_DOWN || d === TOO_LARGE || d === CONNECTION_FRAMING || (!req.complete && declaresBody(req));
        // A 429's prebuilt head (refusal-head.ts) is written as is; one that closes the connection is built.
        if (d.head !== undefined && !close) respondWithHead(res, d.status, d.head, d.body!);
        else respondJson(res, d.status, d.body!, d.headers, close);
        return this.finish(req, id, s, { status: d.status, result: undefined, body: d.body }, started);
      }
      // Routed by the method it was counted as (Rack's override applied), as the upstream's Rails routes it.
      const forwarder = this.opts.routes?.pick(s.view.method, s.view.path)?.forwarder ?? this.opts.forwarder;
      const forwarded = forwardedHeaders(req, s.view.peer, id, s.view);
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
      };
      forwarder.send(req, res, out, (result) => this.forwarded(req, res, id, started, s, result));
    } catch (err) {
      this.failed(req, res, id, err, started);
    }
  }

  /** The upstream's answer is on its way to the client (or the exchange failed): recorded, never thrown from (undici calls this). */
  private forwarded(req: http.IncomingMessage, res: http.ServerResponse, id: string, started: number, s: Screened, result: ForwardResult): void {
    try {
      // The pool refused it before the upstream saw it: its buckets are given back, then it is answered
      // (a client gone meanwhile is recorded as gone).
      if (result.error !== undefined && isPoolRefusal(result.error)) {
        const gone = res.destroyed;
        answerPoolRefusal(req, res, result.error, refundRefused(this.opts.store, s, result.error));
        if (gone) return this.finish(req, id, s, { status: 0, result: { status: 0, error: 'CLIENT_ABORTED', seconds: result.seconds } }, started);
      }
      this.finish(req, id, s, { status: result.status, result }, started);
    } catch (err) {
      this.failed(req, res, id, err, started);
    }
  }

  /** A bug must cost one request, never the process. */
  private failed(req: http.IncomingMessage, res: http.ServerResponse, id: string, err: unknown, started: number): void {
    if (!res.headersSent) respondError(res, 'INTERNAL', NO_HEADERS);
    else res.destroy();
    this.logFailure(req, id, err, started);
  }

  private async tunnel(req: http.IncomingMessage, socket: Duplex, head: Buffer, id: string, started: number): Promise<void> {
    const screened = screen(this.ctx, this.viewOf(req), null, undefined, (release) => (socket.destroyed ? release() : socket.once('close', release)));
    const s = screened instanceof Promise ? await screened : screened;
    const d = s.decision;
    if (!d.admit) {
      respondOnSocket(socket, d.status, d.body!, d.headers);
      return this.finish(req, id, s, { status: d.status, result: undefined, body: d.body }, started);
    }
    const tunnel = this.opts.routes?.pick(s.view.method, s.view.path)?.tunnel ?? this.opts.tunnel;
    const result = await tunnel.open(req, socket, head, s.target, forwardedHeaders(req, s.view.peer, id, s.view), d.headers, d.matched);
    this.finish(req, id, s, { status: result.status, result }, started);
  }

  /** The request as the stages read it, with the policy snapshot read once. */
  private viewOf(req: http.IncomingMessage): RequestView {
    const policy = this.opts.policy();
    return new RequestView(req, policy, policy.resolveIp.peer(req.socket.remoteAddress));
  }

  /** The one place a request's answer is recorded: the response metrics and the access-log line. */
  private finish(req: http.IncomingMessage, id: string, s: Screened, end: Ending, started: number): void {
    const r = end.result;
    const error = endingError(r, this.opts.drain);
    // The duration ends here, for the access-log line and the latency histogram alike.
    const elapsedMs = performance.now() - started;
    this.opts.metrics.observeResponse(end.status, s.decision.kind, elapsedMs / 1000);
    const record =
      this.opts.onRequest !== undefined && this.opts.wantsRecords?.() !== false
        ? recordOf(req, id, s.view, s.decision, { status: end.status, error, bodyLength: end.body?.length ?? r?.bodyLength }, elapsedMs)
        : undefined;
    if (s.banHits && this.opts.guard) countBans(this.opts.guard, s.banHits, end.status);
    // A surge's trigger counts the upstream's own answers to what was admitted (surge/surges.ts: by status,
    // per network; no wait, no store call unless a trigger rule counted it). A gateway answer never counts.
    if (s.decision.kind === 'allowed' && r !== undefined && r.error === undefined)
      this.opts.guard?.surges?.answered(s.decision.rules, r.status, s.view.client.address);
    const { metrics } = this.opts;
    if (r === undefined) metrics.gatewayResponses.labels(String(end.status)).inc();
    else if (r.error === undefined) metrics.observeUpstream(r.status, r.seconds);
    else if (error === 'DRAIN_TIMEOUT') metrics.drainCuts.inc();
    else if (r.error !== 'CLIENT_ABORTED' && isGatewayAnswer(r.error)) metrics.gatewayResponses.labels(String(r.status)).inc();
    else if (r.error !== 'CLIENT_ABORTED') {
      metrics.upstreamErrors.labels(upstreamErrorReason(r.error)).inc();
      metrics.gatewayResponses.labels(String(r.status)).inc();
    }
    if (record !== undefined) this.opts.onRequest!(record);
  }

  private logFailure(req: http.IncomingMessage, id: string, err: unknown, started: number): void {
    const elapsedMs = performance.now() - started;
    this.opts.metrics.gatewayResponses.labels(String(GATEWAY_ERRORS.INTERNAL.status)).inc();
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

/**
 * The error an exchange is logged with. A socket closed under a request is the client's doing, but for
 * the connections the drain closes itself when server.drainGrace runs out: those are the gateway's cut.
 */
function endingError(r: ForwardResult | undefined, drain: GatewayOptions['drain']): string | undefined {
  if (r?.error === 'CLIENT_ABORTED' && drain?.cut === true) return 'DRAIN_TIMEOUT';
  return r?.error;
}

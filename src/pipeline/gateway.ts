/**
 * @module The request pipeline, one for plain requests and WebSocket upgrades alike: drain check →
 * normalize → body-size check → decide (identify, match, consume) → then one of two endings, forward
 * (undici) or tunnel (upgrade), each closed by one `finish()` that records the response metric and the
 * access-log line. The rate-limit headers go on every answer of a matched request, a 101 included.
 */
import type http from 'node:http';
import type { Duplex, Readable } from 'node:stream';
import type { Store } from '../limiter/types.js';
import type { Metrics } from '../observability/metrics.js';
import { normalizePath } from '../routing/index.js';
import type { Forwarder, ForwardResult } from '../proxy/forward.js';
import { declaresBody, requestId } from '../http/message.js';
import { forwardedHeaders } from '../proxy/client-ip-headers.js';
import type { Tunnel } from '../proxy/tunnel.js';
import type { UpstreamRoutes } from '../proxy/routes.js';
import { connectionListed, namesFraming } from '../proxy/hop-by-hop.js';
import type { BodyRateWatch } from '../http/body-rate.js';
import {
  ERROR_BODIES,
  GATEWAY_ERRORS,
  badPathBody,
  errorBody,
  isGatewayAnswer,
  paramConflictMessage,
  respondError,
  type GatewayErrorCode,
  respondJson,
  respondOnSocket,
  upstreamErrorReason,
} from '../http/errors.js';
import { bodyCanDecide, decide } from './decide.js';
import { NO_HEADERS, refusal, type Decision, type DecisionKind } from './decision.js';
import { RequestView } from './request-view.js';
import { continueNow } from '../http/expect-continue.js';
import { duplicatedHeader, readRequestParams, type RequestParams } from '../rails/index.js';
import type { RequestPolicy } from './policy.js';
import type { Guard, Release } from '../guard/guard.js';
import { countBans, guardEarly, guardStage, whenDone, type BanHit } from './guard-stage.js';
import { NO_GUARD_RULES } from '../guard/rules.js';
import { recordOf, type RequestRecord } from './access-record.js';

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
  /** `server.minBodyRate`: every request body is watched until it has arrived (absent: none is). */
  bodyRate?: BodyRateWatch;
}

/** What the stages before the ending found: a refusal to write, or what the ending needs. */
interface Screened {
  readonly decision: Decision;
  /** The request, each fact found once (its path: the raw target when it could not be normalized). */
  readonly view: RequestView;
  /** What goes upstream: the normalized path and the query. */
  readonly target: string;
  readonly maxBody: number;
  /** What to forward instead of the request itself after a body peek; null: the request. */
  readonly body: Readable | null;
  /** X-HTTP-Method-Override is not what Rails routes by: it must not reach the upstream. */
  readonly dropOverrideHeader: boolean;
  /** Bans the request matched, counted once its answer is known; null: none. */
  readonly banHits?: readonly BanHit[] | null;
}

/** How an exchange ended, for `finish()`: a gateway answer carries no `result`. */
interface Ending {
  readonly status: number;
  readonly result: ForwardResult | undefined;
}

const SHUTTING_DOWN: Decision = Object.freeze(catalogued('SHUTTING_DOWN'));
const TOO_LARGE: Decision = Object.freeze(catalogued('PAYLOAD_TOO_LARGE'));
const DUPLICATE_CONTENT_TYPE: Decision = Object.freeze(catalogued('DUPLICATE_CONTENT_TYPE'));
const DUPLICATE_AUTHORIZATION: Decision = Object.freeze(catalogued('DUPLICATE_AUTHORIZATION'));
const CONNECTION_FRAMING: Decision = Object.freeze(catalogued('CONNECTION_NAMES_FRAMING'));
/** `block.ips`: Mastodon's IP blocks answer 403 with this body. */
const BLOCKED: Decision = Object.freeze(catalogued('FORBIDDEN', 'blocked'));

export class Gateway {
  private draining = false;

  constructor(private readonly opts: GatewayOptions) {}

  /** New requests and upgrades are answered 503 from now on (graceful shutdown). */
  startDraining(): void {
    this.draining = true;
  }

  /**
   * Also node:http's 'checkContinue' listener: a request with `Expect: 100-continue` gets its
   * `100 Continue` from the gateway once admitted (or before its body is read for the decision), so a
   * refused client never sends its body.
   */
  readonly handle = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const started = performance.now();
    this.opts.bodyRate?.watch(req, res);
    this.forward(req, res, started).catch((err: unknown) => {
      // A bug must cost one request, never the process.
      if (!res.headersSent) respondError(res, 'INTERNAL', NO_HEADERS);
      else res.destroy();
      this.logFailure(req, err, started);
    });
  };

  readonly handleUpgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer): void => {
    const started = performance.now();
    this.opts.tunnel.track(socket);
    this.tunnel(req, socket, head, started).catch((err: unknown) => {
      socket.destroy();
      this.logFailure(req, err, started);
    });
  };

  /** Closes every open tunnel (the last step of a drain: upgraded sockets have no natural end). */
  closeTunnels(): void {
    this.opts.tunnel.closeAll();
    this.opts.routes?.closeTunnels();
  }

  private async forward(req: http.IncomingMessage, res: http.ServerResponse, started: number): Promise<void> {
    const s = await this.screen(req, res, (release) => whenDone(res, req, release));
    const d = s.decision;
    const id = requestId(req);
    // Answered while the stages ran: a body too slow (http/body-rate.ts).
    if (res.headersSent) return this.finish(req, id, s, { status: res.statusCode, result: undefined }, started);
    if (!d.admit) {
      // A request body the gateway will not read: answering early closes the connection, not drains it.
      const close = d === SHUTTING_DOWN || d === TOO_LARGE || d === CONNECTION_FRAMING || (!req.complete && declaresBody(req));
      respondJson(res, d.status, d.body!, d.headers, close);
      return this.finish(req, id, s, { status: d.status, result: undefined }, started);
    }
    const forwarder = this.opts.routes?.pick(req.method ?? 'GET', s.view.path)?.forwarder ?? this.opts.forwarder;
    const forwarded = forwardedHeaders(req, s.view.peer, id);
    continueNow(req, res);
    const result = await forwarder.forward(req, res, {
      pathAndQuery: s.target,
      forwarded,
      extraHeaders: d.headers,
      dropUpstreamRateLimitHeaders: d.matched,
      maxBodySize: s.maxBody,
      body: s.body,
      dropOverrideHeader: s.dropOverrideHeader,
      clientKey: s.view.client.key,
    });
    this.finish(req, id, s, { status: result.status, result }, started);
  }

  private async tunnel(req: http.IncomingMessage, socket: Duplex, head: Buffer, started: number): Promise<void> {
    const s = await this.screen(req, undefined, (release) => (socket.destroyed ? release() : socket.once('close', release)));
    const d = s.decision;
    const id = requestId(req);
    if (!d.admit) {
      respondOnSocket(socket, d.status, d.body!, d.headers);
      return this.finish(req, id, s, { status: d.status, result: undefined }, started);
    }
    const tunnel = this.opts.routes?.pick(req.method ?? 'GET', s.view.path)?.tunnel ?? this.opts.tunnel;
    const result = await tunnel.open(req, socket, head, s.target, forwardedHeaders(req, s.view.peer, id), d.headers, d.matched);
    this.finish(req, id, s, { status: result.status, result }, started);
  }

  /**
   * The stages every request goes through before its ending. Reads the policy snapshot once. `res` is
   * there when a body may be read (not for an upgrade): a client waiting on `Expect: 100-continue`
   * is then told to send it.
   */
  private async screen(req: http.IncomingMessage, res: http.ServerResponse | undefined, onEnd: (release: Release) => void): Promise<Screened> {
    const policy = this.opts.policy();
    const v = new RequestView(req, policy, policy.resolveIp.peer(req.socket.remoteAddress));
    // Decided before anything else: a blocked client is never counted, never forwarded.
    if (policy.blockIps !== null && policy.blockIps.contains(v.client.address)) {
      this.opts.guard?.metrics?.blockedRequests.labels('config').inc();
      return refused(BLOCKED, v);
    }
    const guard = this.opts.guard;
    if (guard !== undefined && guard.hasEarly()) {
      const early = guardEarly(guard, policy, v.client);
      if (early !== null) return refused(early, v);
    }
    if (this.draining) return refused(SHUTTING_DOWN, v);
    const target = normalizePath(v.path);
    if (!target.ok) return refused(refusal(GATEWAY_ERRORS.BAD_PATH.status, badPathBody(target.reason)), v);
    const path = (v.path = target.path);
    v.query = target.query;
    const dup = duplicatedHeader(req.rawHeaders);
    if (dup !== null) return refused(dup === 'content-type' ? DUPLICATE_CONTENT_TYPE : DUPLICATE_AUTHORIZATION, v);
    if (namesFraming(connectionListed(req.headers.connection))) return refused(CONNECTION_FRAMING, v);
    // Refused before counting: a request that will not be served must not spend anyone's tokens.
    const maxBody = policy.maxBodySize(v.method, path);
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > maxBody) return refused(TOO_LARGE, v);
    v.matched = policy.snapshot.matcher.match(v.method, path);

    const read = await this.readParams(v, res);
    if ('refusal' in read) return refused(read.refusal, v);
    const p = read.params;
    let banHits: readonly BanHit[] | null = null;
    if (guard !== undefined && policy.guard !== NO_GUARD_RULES) {
      // Bans on other keys and in-flight slots: before any counting.
      const g = await guardStage(guard, v, onEnd);
      if (g.refusal !== null) return refused(g.refusal, v);
      banHits = g.banHits;
    }
    const decision = await decide(this.opts, v);
    return { decision, view: v, target: path + target.query, maxBody, body: p.body, dropOverrideHeader: p.dropOverrideHeader, banHits };
  }

  /**
   * Reads the request as Rails will see it: the method Rack's override names, the token wherever
   * Doorkeeper finds it (reading the body only when that can change the decision), the `param:` values.
   */
  private async readParams(v: RequestView, res: http.ServerResponse | undefined): Promise<{ refusal: Decision } | { params: RequestParams }> {
    const { req, policy } = v;
    const readBody = res !== undefined && bodyCanDecide(v);
    if (readBody) continueNow(req, res);
    const rawQuery = v.query.length > 1 ? v.query.slice(1) : '';
    const read = readRequestParams(req, rawQuery, { wanted: policy.wantedParams, maxBytes: policy.paramPeekBytes, readBody });
    const params = read instanceof Promise ? await read : read;
    if (!params.ok) return { refusal: refusal(params.status, errorBody(params.message)) };
    const p = params.params;
    v.token = p.token.kind === 'token' ? p.token.token : null;
    v.form = p.bodyValues;
    v.routeAs(p.method);
    // `param:` rules: their values from the query and the body together (two different ones: 400).
    const values = policy.paramNames.length > 0 ? ruleParamValues(p, policy.paramNames) : undefined;
    if (typeof values === 'string') return { refusal: refusal(GATEWAY_ERRORS.BAD_REQUEST.status, errorBody(paramConflictMessage(values))) };
    v.values = values;
    return { params: p };
  }

  /** The one place a request's answer is recorded: the response metric and the access-log line. */
  private finish(req: http.IncomingMessage, id: string, s: Screened, end: Ending, started: number): void {
    const r = end.result;
    // The access-log line first (its duration ends here), then what the answer counts.
    const record =
      this.opts.onRequest !== undefined && this.opts.wantsRecords?.() !== false
        ? recordOf(req, id, s.view, s.decision, { status: end.status, error: r?.error }, started)
        : undefined;
    if (s.banHits && this.opts.guard) countBans(this.opts.guard, s.banHits, end.status);
    const { metrics } = this.opts;
    if (r === undefined) metrics.gatewayResponses.labels(String(end.status)).inc();
    else if (r.error === undefined) metrics.observeUpstream(r.status, r.seconds);
    else if (r.error !== 'CLIENT_ABORTED' && isGatewayAnswer(r.error)) metrics.gatewayResponses.labels(String(r.status)).inc();
    else if (r.error !== 'CLIENT_ABORTED') {
      metrics.upstreamErrors.labels(upstreamErrorReason(r.error)).inc();
      metrics.gatewayResponses.labels(String(r.status)).inc();
    }
    if (record !== undefined) this.opts.onRequest!(record);
  }

  private logFailure(req: http.IncomingMessage, err: unknown, started: number): void {
    this.opts.metrics.gatewayResponses.labels(String(GATEWAY_ERRORS.INTERNAL.status)).inc();
    this.opts.onRequest?.({
      id: requestId(req),
      method: req.method ?? '',
      path: req.url ?? '',
      status: GATEWAY_ERRORS.INTERNAL.status,
      rules: [],
      decision: 'rejected',
      ms: Math.round((performance.now() - started) * 1000) / 1000,
      error: err instanceof Error ? err.message : String(err),
    });
  }
}

/** The `param:` names' values, by name; the name of one given twice with different values instead. */
function ruleParamValues(p: RequestParams, names: readonly string[]): Map<string, string> | string {
  const values = new Map<string, string>();
  for (const name of names) {
    const pick = p.param(name);
    if (pick.kind === 'conflict') return name;
    if (pick.kind === 'value') values.set(name, pick.value);
  }
  return values;
}

function refused(decision: Decision, view: RequestView): Screened {
  return { decision, view, target: '', maxBody: 0, body: null, dropOverrideHeader: false };
}

/** A refusal straight from the error catalogue: its status and its pre-serialized body. */
function catalogued(code: GatewayErrorCode, kind: DecisionKind = 'rejected'): Decision {
  return refusal(GATEWAY_ERRORS[code].status, ERROR_BODIES[code], kind);
}

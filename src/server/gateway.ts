/**
 * @module The request pipeline, one for plain requests and WebSocket upgrades alike: drain check →
 * normalize → body-size check → decide (identify, match, consume) → then one of two endings, forward
 * (undici) or tunnel (upgrade), each closed by one `finish()` that records the response metric and the
 * access-log line. The rate-limit headers go on every answer of a matched request, a 101 included.
 */
import type http from 'node:http';
import type { Duplex, Readable } from 'node:stream';
import { randomUUID } from 'node:crypto';
import type { Peer } from '../identity/index.js';
import type { Store } from '../limiter/types.js';
import type { Metrics } from '../metrics.js';
import { normalizePath } from '../routing/index.js';
import { declaresBody, type Forwarder, type ForwardResult } from '../proxy/forward.js';
import { forwardedAsXff, forwardedToSend, type ForwardedHeaders } from '../proxy/client-ip-headers.js';
import type { Tunnel } from '../proxy/tunnel.js';
import type { UpstreamRoutes } from '../proxy/routes.js';
import { ERROR_BODIES, GATEWAY_ERRORS, badPathBody, errorBody, isClientFault, paramConflictMessage, respondError, respondJson, respondOnSocket, upstreamErrorReason } from '../errors.js';
import { bodyCanDecide, decide, firstHeader, type Decision, type DecisionKind } from './decide.js';
import { continueNow } from './expect-continue.js';
import { readRequestParams, type RequestParams } from './read-params.js';
import { duplicatedHeader } from './request-params.js';
import type { RequestPolicy } from './policy.js';
import type { Guard, Release } from '../guard/guard.js';
import { countBans, guardEarly, guardStage, whenDone, type BanHit } from './guard-stage.js';
import { NO_GUARD_RULES } from '../guard/rules.js';
import { clientField } from './client-field.js';

/** One line per request for the access log; no token, no account, no client IP. */
export interface RequestRecord {
  /** The request's `X-Request-Id`, or the one the gateway made and forwarded. */
  id: string;
  method: string;
  path: string;
  status: number;
  /** The rules whose buckets the request was counted in. */
  rules: readonly string[];
  /** On a 429: the rule that rejected it. */
  rule?: string;
  decision: DecisionKind;
  /** `log.client: digest | clear`: the client IP's digest prefix, or the IP itself. */
  client?: string;
  /** Milliseconds from the request's arrival to its answer's head, to the microsecond. */
  ms: number;
  error?: string;
}

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
}

/** What the stages before the ending found: a refusal to write, or what the ending needs. */
interface Screened {
  readonly decision: Decision;
  /** The normalized path (the raw target when it could not be normalized). */
  readonly path: string;
  /** What goes upstream: the normalized path and the query. */
  readonly target: string;
  readonly peer: Peer;
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

const NO_HEADERS: readonly string[] = Object.freeze([]);
const NOTHING_CHARGED = { headers: NO_HEADERS, rules: Object.freeze([]), rejectedBy: undefined, matched: false } as const;
const SHUTTING_DOWN: Decision = Object.freeze(gatewayAnswer(503, ERROR_BODIES.SHUTTING_DOWN));
const TOO_LARGE: Decision = Object.freeze(gatewayAnswer(413, ERROR_BODIES.PAYLOAD_TOO_LARGE));
const DUPLICATE_CONTENT_TYPE: Decision = Object.freeze(gatewayAnswer(400, ERROR_BODIES.DUPLICATE_CONTENT_TYPE));
const DUPLICATE_AUTHORIZATION: Decision = Object.freeze(gatewayAnswer(400, ERROR_BODIES.DUPLICATE_AUTHORIZATION));
/** `block.ips`: Mastodon's IP blocks answer 403 with this body. */
const BLOCKED: Decision = Object.freeze({ ...gatewayAnswer(403, ERROR_BODIES.FORBIDDEN), kind: 'blocked' });
/** A request id from the client is kept when it is a plain token of sane length, else replaced. */
const REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

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
    const id = requestId(req);
    const s = await this.screen(req, res, (release) => whenDone(res, req, release));
    const d = s.decision;
    if (!d.admit) {
      // A request body the gateway will not read: answering early closes the connection, not drains it.
      respondJson(res, d.status, d.body!, d.headers, d === SHUTTING_DOWN || d === TOO_LARGE || (!req.complete && declaresBody(req)));
      return this.finish(req, id, s, { status: d.status, result: undefined }, started);
    }
    continueNow(req, res);
    const forwarder = this.opts.routes?.pick(req.method ?? 'GET', s.path)?.forwarder ?? this.opts.forwarder;
    const result = await forwarder.forward(req, res, {
      pathAndQuery: s.target,
      forwarded: this.forwarded(req, s.peer, id),
      extraHeaders: d.headers,
      dropUpstreamRateLimitHeaders: d.matched,
      maxBodySize: s.maxBody,
      body: s.body,
      dropOverrideHeader: s.dropOverrideHeader,
    });
    this.finish(req, id, s, { status: result.status, result }, started);
  }

  private async tunnel(req: http.IncomingMessage, socket: Duplex, head: Buffer, started: number): Promise<void> {
    const id = requestId(req);
    const s = await this.screen(req, undefined, (release) => (socket.destroyed ? release() : socket.once('close', release)));
    const d = s.decision;
    if (!d.admit) {
      respondOnSocket(socket, d.status, d.body!, d.headers);
      return this.finish(req, id, s, { status: d.status, result: undefined }, started);
    }
    const tunnel = this.opts.routes?.pick(req.method ?? 'GET', s.path)?.tunnel ?? this.opts.tunnel;
    const result = await tunnel.open(req, socket, head, s.target, this.forwarded(req, s.peer, id), d.headers, d.matched);
    this.finish(req, id, s, { status: result.status, result }, started);
  }

  /**
   * The stages every request goes through before its ending. Reads the policy snapshot once. `res` is
   * there when a body may be read (not for an upgrade): a client waiting on `Expect: 100-continue`
   * is then told to send it.
   */
  private async screen(req: http.IncomingMessage, res: http.ServerResponse | undefined, onEnd: (release: Release) => void): Promise<Screened> {
    const policy = this.opts.policy();
    const peer = policy.resolveIp.peer(req.socket.remoteAddress);
    const method = req.method ?? 'GET';
    // Decided before anything else: a blocked client is never counted, never forwarded.
    if (policy.blockIps !== null && policy.blockIps.contains(policy.resolveIp.behind(peer, req.headers['x-forwarded-for'], req.headers.forwarded).address)) {
      this.opts.guard?.metrics?.blockedRequests.labels('config').inc();
      return refused(BLOCKED, req.url ?? '', peer);
    }
    const guard = this.opts.guard;
    if (guard !== undefined && guard.hasEarly()) {
      const early = guardEarly(guard, policy, policy.resolveIp.behind(peer, req.headers['x-forwarded-for'], req.headers.forwarded));
      if (early !== null) return refused(early, req.url ?? '', peer);
    }
    if (this.draining) return refused(SHUTTING_DOWN, req.url ?? '', peer);
    const target = normalizePath(req.url ?? '');
    if (!target.ok) return refused(gatewayAnswer(400, badPathBody(target.reason)), req.url ?? '', peer);
    const path = target.path;
    const dup = duplicatedHeader(req.rawHeaders);
    if (dup !== null) return refused(dup === 'content-type' ? DUPLICATE_CONTENT_TYPE : DUPLICATE_AUTHORIZATION, path, peer);
    // Refused before counting: a request that will not be served must not spend anyone's tokens.
    const maxBody = policy.maxBodySize(method, path);
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > maxBody) return refused(TOO_LARGE, path, peer);

    // Count the request as Rails will see it: the method Rack's override names, the token wherever
    // Doorkeeper finds it (reading the body only when that can change the decision).
    const readBody = res !== undefined && bodyCanDecide(req, policy, method, path);
    if (readBody) continueNow(req, res);
    const rawQuery = target.query.length > 1 ? target.query.slice(1) : '';
    const read = readRequestParams(req, rawQuery, { wanted: policy.wantedParams, maxBytes: policy.paramPeekBytes, readBody });
    const params = read instanceof Promise ? await read : read;
    if (!params.ok) return refused(gatewayAnswer(params.status, errorBody(params.message)), path, peer);
    const p = params.params;
    const token = p.token.kind === 'token' ? p.token.token : null;
    // `param:` rules: their values from the query and the body together (two different ones: 400).
    const values = policy.paramNames.length > 0 ? ruleParamValues(p, policy.paramNames) : undefined;
    if (typeof values === 'string') {
      return refused(gatewayAnswer(400, errorBody(paramConflictMessage(values))), path, peer);
    }
    let banHits: readonly BanHit[] | null = null;
    if (guard !== undefined && policy.guard !== NO_GUARD_RULES) {
      // Bans on other keys and in-flight slots: before any counting.
      const client = policy.resolveIp.behind(peer, req.headers['x-forwarded-for'], req.headers.forwarded);
      const g = await guardStage(guard, policy, { req, peer, client, method: p.method, path, token, query: target.query, values, form: p.bodyValues, onEnd });
      if (g.refusal !== null) return refused(g.refusal, path, peer);
      banHits = g.banHits;
    }
    const decision = await decide(this.opts, req, policy, peer, p.method, path, token, target.query, values, p.bodyValues);
    return { decision, path, target: path + target.query, peer, maxBody, body: p.body, dropOverrideHeader: p.dropOverrideHeader, banHits };
  }

  /**
   * X-Forwarded-* and X-Request-Id for the upstream. A trusted proxy's chain is kept and extended;
   * anyone else's is a claim the upstream must not see.
   */
  private forwarded(req: http.IncomingMessage, peer: Peer, id: string): ForwardedHeaders {
    const xff = req.headers['x-forwarded-for'];
    const { trusted } = peer;
    const fromTrusted = trusted && xff !== undefined;
    const peerAddr = peer.client.address;
    return {
      for: fromTrusted
        ? `${Array.isArray(xff) ? xff.join(', ') : xff}, ${peerAddr}`
        : (forwardedAsXff(trusted, xff, req.headers.forwarded, peerAddr) ?? peerAddr),
      proto: (fromTrusted && firstHeader(req.headers['x-forwarded-proto'])) || 'http',
      host: (fromTrusted && firstHeader(req.headers['x-forwarded-host'])) || req.headers.host || '',
      trusted,
      forwarded: forwardedToSend(trusted, xff, req.headers.forwarded, peerAddr),
      requestId: id,
    };
  }

  /** The one place a request's answer is recorded: the response metric and the access-log line. */
  private finish(req: http.IncomingMessage, id: string, s: Screened, end: Ending, started: number): void {
    const { metrics } = this.opts;
    const r = end.result;
    if (r === undefined) metrics.gatewayResponses.labels(String(end.status)).inc();
    else if (r.error === undefined) metrics.observeUpstream(r.status, r.seconds);
    else if (r.error !== 'CLIENT_ABORTED' && isClientFault(r.error)) metrics.gatewayResponses.labels(String(r.status)).inc();
    else if (r.error !== 'CLIENT_ABORTED') {
      metrics.upstreamErrors.labels(upstreamErrorReason(r.error)).inc();
      metrics.gatewayResponses.labels(String(r.status)).inc();
    }
    if (s.banHits && this.opts.guard) countBans(this.opts.guard, s.banHits, end.status);
    if (this.opts.onRequest === undefined || this.opts.wantsRecords?.() === false) return;
    const d = s.decision;
    const record: RequestRecord = {
      id,
      method: req.method ?? '',
      path: s.path,
      status: end.status,
      rules: d.rules.map((rule) => rule.name),
      decision: d.kind,
      ms: Math.round((performance.now() - started) * 1000) / 1000,
    };
    if (d.rejectedBy !== undefined) record.rule = d.rejectedBy.name;
    if (r?.error !== undefined) record.error = r.error;
    const client = clientField(this.opts.policy(), s.peer, req);
    if (client !== undefined) record.client = client;
    this.opts.onRequest(record);
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

function refused(decision: Decision, path: string, peer: Peer): Screened {
  return { decision, path, target: '', peer, maxBody: 0, body: null, dropOverrideHeader: false };
}

function gatewayAnswer(status: number, body: Buffer): Decision {
  return { admit: false, status, body, kind: 'rejected', ...NOTHING_CHARGED };
}

/** The client's request id when it is usable, else a fresh one (which is then forwarded upstream). */
function requestId(req: http.IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

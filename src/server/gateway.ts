/**
 * @module The request pipeline: normalize → identify → match → consume all buckets → 429 or forward,
 * with the rate-limit headers of the bucket closest to exhaustion on every answer of a matched request.
 */
import type http from 'node:http';
import type { CompiledRule } from '../config/types.js';
import { normalizePath } from '../routing/index.js';
import { declaresBody, type Forwarder } from '../proxy/forward.js';
import { forwardedAsXff, forwardedToSend, type ForwardedHeaders } from '../proxy/client-ip-headers.js';
import { StoreUnavailableError, type ConsumeOutcome, type Store } from '../limiter/types.js';
import type { Metrics } from '../metrics.js';
import { appendRateLimitHeaders, type ResetFormat } from './ratelimit-headers.js';
import { ERROR_BODIES, GATEWAY_ERRORS, type GatewayErrorCode } from './errors.js';
import { bucketsFor, isExemptAccount, type RequestPolicy } from './policy.js';

/** One line per request for the access log; no token, no account, the client IP only as the operator chose. */
export interface RequestRecord {
  method: string;
  path: string;
  status: number;
  rules: readonly string[];
  decision: 'allowed' | 'limited' | 'unmatched' | 'exempt' | 'rejected' | 'store_unavailable';
  ms: number;
  error?: string;
}

export interface GatewayOptions {
  policy: () => RequestPolicy;
  store: Store;
  forwarder: Forwarder;
  metrics: Metrics;
  /** Called once per request when its answer has been decided (the access log). */
  onRequest?: (record: RequestRecord) => void;
  /** Whether onRequest wants records now: when not, none is built (the access log level may be off). */
  wantsRecords?: () => boolean;
}

const NO_HEADERS: readonly string[] = Object.freeze([]);
const JSON_TYPE = 'application/json; charset=utf-8';

export class Gateway {
  private draining = false;

  constructor(private readonly opts: GatewayOptions) {}

  /** New requests are answered 503 from now on (graceful shutdown). */
  startDraining(): void {
    this.draining = true;
  }

  readonly handle = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    this.run(req, res).catch((err: unknown) => {
      // A bug must cost one request, never the process.
      if (!res.headersSent) respondError(res, 'INTERNAL', NO_HEADERS);
      else res.destroy();
      this.opts.onRequest?.({
        method: req.method ?? '',
        path: '',
        status: 500,
        rules: [],
        decision: 'rejected',
        ms: 0,
        error: err instanceof Error ? err.message : String(err),
      });
    });
  };

  /**
   * The limit decision for one request: counted and admitted (with the headers to add), or answered by
   * the gateway. Shared by plain requests and WebSocket upgrades so both are limited the same way.
   */
  async decide(req: http.IncomingMessage, policy: RequestPolicy, method: string, path: string): Promise<Decision> {
    const { metrics } = this.opts;
    const peer = req.socket.remoteAddress;
    const client = policy.resolveIp(peer, req.headers['x-forwarded-for'], req.headers.forwarded);
    const matched = policy.snapshot.matcher.match(method, path);
    if (matched.length === 0) return { admit: true, headers: NO_HEADERS, rules: NO_RULES, matched: false, record: 'unmatched' };
    if (policy.exemptIps !== null && policy.exemptIps.contains(client.address)) {
      return { admit: true, headers: NO_HEADERS, rules: NO_RULES, matched: true, record: 'exempt' };
    }
    let account: string | null = null;
    if (needsAccount(matched)) {
      const peerTrusted = policy.accountHeader !== undefined && peer !== undefined && policy.trustedProxies.contains(peer);
      const headerValue = policy.accountHeader !== undefined ? firstHeader(req.headers[policy.accountHeader]) : undefined;
      const found = policy.account.resolve(req.headers.authorization, headerValue, peerTrusted);
      account = found instanceof Promise ? await found : found;
    }
    if (account !== null && isExemptAccount(policy, account)) {
      return { admit: true, headers: NO_HEADERS, rules: NO_RULES, matched: true, record: 'exempt' };
    }
    const { specs, rules } = bucketsFor(policy, matched, client.key, account);
    if (specs.length === 0) return { admit: true, headers: NO_HEADERS, rules: NO_RULES, matched: true, record: 'unmatched' };

    let outcome: ConsumeOutcome;
    const storeStarted = performance.now();
    try {
      outcome = await this.opts.store.consume(specs);
    } catch (err) {
      if (!(err instanceof StoreUnavailableError)) throw err;
      return { admit: false, status: 503, body: ERROR_BODIES.STORE_UNAVAILABLE, headers: NO_HEADERS, rules, matched: true, record: 'store_unavailable' };
    }
    metrics.storeDuration.observe((performance.now() - storeStarted) / 1000);
    countDecision(metrics, rules, outcome);
    const headers: string[] = [];
    const responses = policy.snapshot.config.responses;
    appendRateLimitHeaders(headers, rules, outcome, responses.reset as ResetFormat, responses.standardHeaders);
    if (!outcome.allowed) return { admit: false, status: 429, body: policy.limitedBody, headers, rules, matched: true, record: 'limited' };
    return { admit: true, headers, rules, matched: true, record: 'allowed' };
  }

  private async run(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const started = performance.now();
    const { metrics } = this.opts;
    const onRequest = this.opts.wantsRecords?.() === false ? undefined : this.opts.onRequest;
    // Read the snapshot once: a reload mid-request must not mix two tables.
    const policy = this.opts.policy();
    const method = req.method ?? 'GET';

    if (this.draining) {
      respondError(res, 'SHUTTING_DOWN', NO_HEADERS, true);
      metrics.gatewayResponses.labels('503').inc();
      return;
    }

    const target = normalizePath(req.url ?? '');
    if (!target.ok) {
      respondJson(res, 400, badPathBody(target.reason), NO_HEADERS, hasUnreadBody(req));
      metrics.gatewayResponses.labels('400').inc();
      onRequest?.({ method, path: req.url ?? '', status: 400, rules: [], decision: 'rejected', ms: performance.now() - started });
      return;
    }
    const path = target.path;

    // Refused before counting: a request that will not be served must not spend anyone's tokens.
    const maxBody = policy.maxBodySize(method, path);
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > maxBody) {
      respondError(res, 'PAYLOAD_TOO_LARGE', NO_HEADERS, true);
      metrics.gatewayResponses.labels('413').inc();
      onRequest?.({ method, path, status: 413, rules: [], decision: 'rejected', ms: performance.now() - started });
      return;
    }

    const d = await this.decide(req, policy, method, path);
    if (!d.admit) {
      respondJson(res, d.status, d.body, d.headers, hasUnreadBody(req));
      metrics.gatewayResponses.labels(String(d.status)).inc();
      onRequest?.({ method, path, status: d.status, rules: names(d.rules), decision: d.record, ms: performance.now() - started });
      return;
    }

    const result = await this.opts.forwarder.forward(req, res, path + target.query, forwardedFor(req, policy), d.headers, d.matched, maxBody);
    if (result.error === undefined) metrics.observeUpstream(result.status, result.seconds);
    else if (result.error === 'PAYLOAD_TOO_LARGE') metrics.gatewayResponses.labels('413').inc();
    else if (result.error !== 'CLIENT_ABORTED') {
      metrics.upstreamErrors.labels(upstreamReason(result.error)).inc();
      metrics.gatewayResponses.labels(String(result.status)).inc();
    }
    onRequest?.({
      method,
      path,
      status: result.status,
      rules: names(d.rules),
      decision: d.record,
      ms: performance.now() - started,
      ...(result.error !== undefined ? { error: result.error } : {}),
    });
  }
}

export type Decision =
  | { admit: true; headers: readonly string[]; rules: readonly CompiledRule[]; matched: boolean; record: RequestRecord['decision'] }
  | { admit: false; status: number; body: Buffer; headers: readonly string[]; rules: readonly CompiledRule[]; matched: true; record: RequestRecord['decision'] };

const NO_RULES: readonly CompiledRule[] = Object.freeze([]);

export function badPathBody(reason: string): Buffer {
  return Buffer.from(JSON.stringify({ error: `${GATEWAY_ERRORS.BAD_PATH.message}: ${reason}` }));
}

/**
 * X-Forwarded-* for the upstream. A trusted proxy's chain is kept and extended; anyone else's is a
 * claim the upstream must not see.
 */
export function forwardedFor(req: http.IncomingMessage, policy: RequestPolicy): ForwardedHeaders {
  const peer = req.socket.remoteAddress;
  const xff = req.headers['x-forwarded-for'];
  const peerAddr = peer === undefined ? '' : peer.startsWith('::ffff:') ? peer.slice(7) : peer;
  const trusted = peer !== undefined && policy.trustedProxies.contains(peer);
  const fromTrusted = xff !== undefined && trusted;
  return {
    for: fromTrusted
      ? `${Array.isArray(xff) ? xff.join(', ') : xff}, ${peerAddr}`
      : (forwardedAsXff(trusted, xff, req.headers.forwarded, peerAddr) ?? peerAddr),
    proto: (fromTrusted && firstHeader(req.headers['x-forwarded-proto'])) || 'http',
    host: (fromTrusted && firstHeader(req.headers['x-forwarded-host'])) || req.headers.host || '',
    trusted,
    forwarded: forwardedToSend(trusted, xff, req.headers.forwarded, peerAddr),
  };
}

function needsAccount(rules: readonly CompiledRule[]): boolean {
  for (const r of rules) if (r.per === 'account') return true;
  return false;
}

function names(rules: readonly CompiledRule[]): string[] {
  return rules.map((r) => r.name);
}

function firstHeader(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

function upstreamReason(code: string): string {
  return code === 'UPSTREAM_TIMEOUT' ? 'timeout' : code === 'UPSTREAM_RESET' ? 'reset' : code === 'BAD_REQUEST' ? 'bad_request' : 'unreachable';
}

/**
 * Per rule: allowed, or limited for the rules that rejected, or shadow_limited for shadow rules that
 * would have. Rules of a rejected request that had room are not counted: they were not charged.
 */
function countDecision(metrics: Metrics, rules: readonly CompiledRule[], outcome: ConsumeOutcome): void {
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i]!;
    const b = outcome.buckets[i]!;
    const c = metrics.forRule(rule.name);
    if (b.limited) {
      if (rule.shadow) c.shadowLimited++;
      else c.limited++;
    } else if (outcome.allowed) {
      c.allowed++;
      if (b.remaining <= rule.limit * 0.2) c.nearLimit++;
    }
  }
}

/** A request body the gateway will not read: answering early must close the connection, not drain it. */
function hasUnreadBody(req: http.IncomingMessage): boolean {
  return !req.complete && declaresBody(req);
}

export function respondJson(res: http.ServerResponse, status: number, body: Buffer, extra: readonly string[], close = false): void {
  const headers: string[] = ['Content-Type', JSON_TYPE, 'Content-Length', String(body.length)];
  for (const h of extra) headers.push(h);
  if (close) headers.push('Connection', 'close');
  res.writeHead(status, headers);
  res.end(body);
}

export function respondError(res: http.ServerResponse, code: GatewayErrorCode, extra: readonly string[], close = false): void {
  respondJson(res, GATEWAY_ERRORS[code].status, ERROR_BODIES[code], extra, close);
}

/**
 * @module The upgrade ending of the pipeline: an admitted WebSocket upgrade is tunnelled to the upstream
 * by http-proxy, and the upstream's answer head (the `101`, or a refusal) carries the gateway's
 * rate-limit headers, merged with any the upstream sent. Either side closing closes the other.
 */
// The module's binding, not the global: globalThis.performance is a getter, called on every use.
import { performance } from 'node:perf_hooks';
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import httpProxy from 'http-proxy';
import { respondOnSocket, ERROR_BODIES, GATEWAY_ERRORS } from '../http/errors.js';
import { classifyUpstreamError } from './upstream-errors.js';
import type { ForwardResult } from './forward-result.js';
import { CLIENT_IP_CLAIMS, REBUILT_HEADERS, SCHEME_CLAIMS, type ForwardedHeaders } from './client-ip-headers.js';
import { rackSpelling } from '../http/header-spelling.js';
import { isRateLimitHeader } from './hop-by-hop.js';
import { mergeUpstreamLimits } from './upstream-limits.js';

/** Per-upgrade state, found again by http-proxy's events through the request object. */
interface Upgrade {
  readonly extraHeaders: readonly string[];
  readonly dropUpstreamRateLimitHeaders: boolean;
  readonly started: number;
  readonly resolve: (r: ForwardResult) => void;
  settled: boolean;
}

const UPGRADE = Symbol('rategate.upgrade');
type UpgradingRequest = http.IncomingMessage & { [UPGRADE]?: Upgrade };

export class Tunnel {
  private readonly sockets = new Set<Duplex>();
  private readonly proxy: httpProxy;

  /** `http://host:port` of the upstream (the upstream span's url.full). */
  constructor(readonly origin: string) {
    this.proxy = httpProxy.createProxyServer({ target: origin, ws: true, xfwd: false });
    // Registered before http-proxy's own listeners, so the head is rewritten before it is written.
    this.proxy.on('proxyReqWs', (proxyReq, req) => {
      const up = (req as UpgradingRequest)[UPGRADE];
      if (up === undefined) return;
      proxyReq.on('upgrade', (proxyRes) => settleHead(up, proxyRes));
      // An upstream that refuses the upgrade answers a plain response (ClientRequest emits 'upgrade' otherwise).
      proxyReq.on('response', (proxyRes) => settleHead(up, proxyRes));
    });
    // A failed or reset tunnel: answer if nothing was sent yet, and never leave a half-open socket.
    this.proxy.on('error', (err, req, socket) => {
      const up = (req as UpgradingRequest)[UPGRADE];
      const s = socket as Duplex | undefined;
      if (up !== undefined && !up.settled) {
        up.settled = true;
        const code = classifyUpstreamError(err);
        if (s !== undefined) respondOnSocket(s, GATEWAY_ERRORS[code].status, ERROR_BODIES[code], up.extraHeaders);
        up.resolve({
          status: GATEWAY_ERRORS[code].status,
          error: code,
          seconds: (performance.now() - up.started) / 1000,
        });
      } else if (s !== undefined) s.destroy();
    });
  }

  /**
   * Tunnels an admitted upgrade to `pathAndQuery` upstream. Resolves when the upstream's answer head
   * was passed on (status 101, or its refusal) or the attempt failed; the tunnel then lives on.
   */
  open(
    req: http.IncomingMessage,
    socket: Duplex,
    head: Buffer,
    pathAndQuery: string,
    forwarded: ForwardedHeaders,
    extraHeaders: readonly string[],
    dropUpstreamRateLimitHeaders: boolean,
    /** The gateway's traceparent (and tracestate), replacing the client's; null: the client's pass through. */
    trace: readonly string[] | null = null,
  ): Promise<ForwardResult> {
    if (socket.destroyed) return Promise.resolve({ status: 0, error: 'CLIENT_ABORTED', seconds: 0 });
    req.url = pathAndQuery;
    dropClaims(req.headers, forwarded.trusted);
    req.headers['x-forwarded-for'] = forwarded.for;
    req.headers['x-forwarded-proto'] = forwarded.proto;
    req.headers['x-forwarded-host'] = forwarded.host;
    req.headers['x-forwarded-port'] = forwarded.port;
    req.headers['x-forwarded-ssl'] = forwarded.ssl;
    req.headers['x-request-id'] = forwarded.requestId;
    if (forwarded.forwarded !== undefined) req.headers.forwarded = forwarded.forwarded;
    if (trace !== null) {
      delete req.headers.traceparent;
      delete req.headers.tracestate;
      for (let i = 0; i < trace.length; i += 2) req.headers[trace[i]!] = trace[i + 1]!;
    }
    return new Promise((resolve) => {
      (req as UpgradingRequest)[UPGRADE] = {
        extraHeaders,
        dropUpstreamRateLimitHeaders,
        started: performance.now(),
        resolve,
        settled: false,
      };
      this.proxy.ws(req, socket, head);
    });
  }

  /**
   * Takes over an upgrade socket as soon as node:http hands it over, before the limit decision: it has
   * left the server's books (so shutdown must close it from here) and lost the server's error listener
   * (an unhandled reset would throw).
   */
  track(socket: Duplex): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  }

  /** Closes every open tunnel (the end of a drain). */
  closeAll(): void {
    for (const s of this.sockets) s.destroy();
    this.proxy.close();
  }
}

/**
 * Security: removes from the upgrade's headers (http-proxy copies them all) what the gateway rebuilds,
 * and the client-IP and scheme claims of an untrusted peer, in any spelling Puma reads as theirs (`_`
 * = `-`); a rebuilt name goes in any spelling even from a trusted proxy, as in forward.ts.
 */
function dropClaims(headers: http.IncomingHttpHeaders, trusted: boolean): void {
  for (const key of Object.keys(headers)) {
    const name = rackSpelling(key);
    if (REBUILT_HEADERS.has(name) || name === 'x-request-id') delete headers[key];
    else if (!trusted && (CLIENT_IP_CLAIMS.has(name) || SCHEME_CLAIMS.has(name))) delete headers[key];
  }
}

/** The upstream's answer head is about to be written to the client: put the gateway's headers in it. */
function settleHead(up: Upgrade, proxyRes: http.IncomingMessage): void {
  if (up.settled) return;
  up.settled = true;
  const headers = proxyRes.headers;
  let pairs: readonly string[] = up.extraHeaders;
  if (up.dropUpstreamRateLimitHeaders) {
    // Merged as on plain answers (upstream-limits.ts): the head is rewritten in place before http-proxy writes it.
    const upstream: string[] = [];
    for (const name of Object.keys(headers)) {
      if (!isRateLimitHeader(name)) continue;
      const v = headers[name]!;
      upstream.push(name, Array.isArray(v) ? v.join(', ') : v);
      delete headers[name];
    }
    const status = proxyRes.statusCode ?? 0;
    if (upstream.length > 0 || status === 429) {
      const merged: string[] = [];
      mergeUpstreamLimits(merged, status, upstream, up.extraHeaders, headers['retry-after'] !== undefined, Date.now());
      pairs = merged;
    }
  }
  for (let i = 0; i < pairs.length; i += 2) headers[pairs[i]!.toLowerCase()] = pairs[i + 1]!;
  up.resolve({ status: proxyRes.statusCode ?? 0, error: undefined, seconds: (performance.now() - up.started) / 1000 });
}

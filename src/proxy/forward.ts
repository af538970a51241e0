/**
 * @module Forwarding to the upstream with an undici Pool: bodies streamed both ways, hop-by-hop headers
 * dropped, X-Forwarded-* set, timeouts, client aborts propagated, failures mapped to 502/504.
 */
import type http from 'node:http';
import { Transform, type TransformCallback } from 'node:stream';
import { Pool, errors as undiciErrors } from 'undici';
import { connectionListed, isHopByHop } from './hop-by-hop.js';
import type { GatewayErrorCode } from '../server/errors.js';

export interface ForwarderOptions {
  /** `http://host:port` of the upstream. */
  origin: string;
  /** Waiting for the upstream's headers, and for each chunk of its body. */
  timeoutMs: number;
  connectTimeoutMs: number;
  /** Upstream connections kept open (keep-alive); more requests queue in the pool. */
  connections?: number;
}

/** What happened upstream, for metrics and logs. */
export interface ForwardResult {
  /** The upstream status, or the status the gateway answered with on failure; 0 when the client left first. */
  status: number;
  /** The gateway error code when the upstream failed. */
  error: GatewayErrorCode | 'CLIENT_ABORTED' | undefined;
  /** Seconds from sending the request to the upstream's response headers (or the failure). */
  seconds: number;
}

/** What the forwarder answers with itself when the upstream fails. */
export type ErrorResponder = (res: http.ServerResponse, code: GatewayErrorCode, extraHeaders: readonly string[], close: boolean) => void;

export class Forwarder {
  readonly pool: Pool;
  private readonly timeoutMs: number;

  constructor(opts: ForwarderOptions, private readonly respondError: ErrorResponder) {
    this.timeoutMs = opts.timeoutMs;
    this.pool = new Pool(opts.origin, {
      connections: opts.connections ?? 128,
      pipelining: 1,
      connect: { timeout: opts.connectTimeoutMs },
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
      keepAliveTimeout: 4_000,
    });
  }

  /**
   * Sends `req` to the upstream at `pathAndQuery` and streams the answer to `res`, adding `extraHeaders`
   * (flat name/value pairs: the rate-limit headers). Resolves when the response headers were written
   * or the failure was answered.
   */
  async forward(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    pathAndQuery: string,
    forwarded: { for: string; proto: string; host: string },
    extraHeaders: readonly string[],
    dropUpstreamRateLimitHeaders: boolean,
    maxBodySize = Infinity,
  ): Promise<ForwardResult> {
    const started = performance.now();
    const ac = new AbortController();
    // A client that goes away must not keep the upstream working for nobody.
    const onClose = () => {
      if (!res.writableFinished) ac.abort();
    };
    res.once('close', onClose);

    const hasBody = req.headers['content-length'] !== undefined ? req.headers['content-length'] !== '0' : req.headers['transfer-encoding'] !== undefined;
    try {
      const up = await this.pool.request({
        path: pathAndQuery,
        method: req.method as 'GET',
        headers: upstreamRequestHeaders(req, forwarded, hasBody),
        // A declared length was checked before; a chunked body is counted as it streams.
        body: hasBody ? (req.headers['content-length'] === undefined && maxBodySize !== Infinity ? req.pipe(new BodyLimit(maxBodySize)) : req) : null,
        signal: ac.signal,
      });
      const seconds = (performance.now() - started) / 1000;
      if (res.destroyed) {
        up.body.destroy();
        return { status: 0, error: 'CLIENT_ABORTED', seconds };
      }
      const out = clientResponseHeaders(up.headers, dropUpstreamRateLimitHeaders);
      for (const h of extraHeaders) out.push(h);
      res.writeHead(up.statusCode, out);
      // pipe, not stream.pipeline: pipeline aborts an AbortController of its own on every completion,
      // which builds a DOMException (~5 µs) per request. A client leaving is handled by onClose above.
      // Reset mid-body: the status is already sent, so the only honest signal is to cut the connection.
      up.body.once('error', () => res.destroy());
      up.body.pipe(res);
      return { status: up.statusCode, error: undefined, seconds };
    } catch (err) {
      const seconds = (performance.now() - started) / 1000;
      res.off('close', onClose);
      if (ac.signal.aborted || res.destroyed) return { status: 0, error: 'CLIENT_ABORTED', seconds };
      const code = err instanceof BodyTooLargeError || (err as { cause?: unknown }).cause instanceof BodyTooLargeError ? 'PAYLOAD_TOO_LARGE' : classifyUpstreamError(err);
      if (res.headersSent) res.destroy();
      // After an oversized body, close rather than read the rest of it.
      else this.respondError(res, code, extraHeaders, code === 'PAYLOAD_TOO_LARGE');
      return { status: code === 'UPSTREAM_TIMEOUT' ? 504 : code === 'BAD_REQUEST' ? 400 : code === 'PAYLOAD_TOO_LARGE' ? 413 : 502, error: code, seconds };
    }
  }

  get requestTimeoutMs(): number {
    return this.timeoutMs;
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

export class BodyTooLargeError extends Error {
  readonly code = 'BODY_TOO_LARGE';
}

/** Passes a chunked body through, failing once it exceeds `max` bytes: nothing is buffered. */
class BodyLimit extends Transform {
  private seen = 0;
  constructor(private readonly max: number) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.seen += chunk.length;
    if (this.seen > this.max) done(new BodyTooLargeError(`request body over ${this.max} bytes`));
    else done(null, chunk);
  }
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

function upstreamRequestHeaders(
  req: http.IncomingMessage,
  forwarded: { for: string; proto: string; host: string },
  hasBody: boolean,
): string[] {
  const raw = req.rawHeaders;
  const listed = connectionListed(req.headers.connection);
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    if (isHopByHop(lower, listed)) continue;
    // Host is the upstream's (undici sets it); the client's goes in X-Forwarded-Host. X-Forwarded-* are rebuilt.
    if (lower === 'host' || lower === 'x-forwarded-for' || lower === 'x-forwarded-proto' || lower === 'x-forwarded-host') continue;
    if (lower === 'content-length' && !hasBody) continue;
    out.push(name, raw[i + 1]!);
  }
  out.push('x-forwarded-for', forwarded.for, 'x-forwarded-proto', forwarded.proto, 'x-forwarded-host', forwarded.host);
  return out;
}

function clientResponseHeaders(headers: Record<string, string | string[] | undefined>, dropRateLimit: boolean): string[] {
  const listed = connectionListed(headers.connection);
  const out: string[] = [];
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || isHopByHop(name, listed)) continue;
    // The gateway's own rate-limit headers replace any the upstream sent, so clients see one truth.
    if (dropRateLimit && (name.startsWith('x-ratelimit-') || name === 'ratelimit' || name === 'ratelimit-policy')) continue;
    if (Array.isArray(value)) for (const v of value) out.push(name, v);
    else out.push(name, value);
  }
  return out;
}

/**
 * @module The one catalogue of gateway-made answers (a stable code, an HTTP status, a message) and the
 * two ways of writing one: on an http.ServerResponse, or as raw HTTP on a socket (client errors before a
 * request exists, refused upgrades). A leaf: every answering place imports it, it imports nothing.
 */
import type http from 'node:http';
import { STATUS_CODES } from 'node:http';
import { Http2ServerResponse, constants as h2 } from 'node:http2';
import type { Duplex } from 'node:stream';

export const GATEWAY_ERRORS = {
  BAD_PATH: { status: 400, message: 'Bad request path' },
  BAD_REQUEST: { status: 400, message: 'Bad request' },
  QUERY_CONFLICT: { status: 400, message: 'Bad request: the query string has conflicting parameters' },
  /** pipeline/read-stage.ts: a `param:` rule's parameter, or the token, given twice with different values (the body's error names it). */
  PARAM_CONFLICT: { status: 400, message: 'Bad request: a counted parameter is given twice with different values' },
  /** pipeline/gateway.ts: Node reads the first of two, Puma joins them and Rack reads the last; none is guessed. */
  DUPLICATE_CONTENT_TYPE: { status: 400, message: 'Bad request: the Content-Type header is given more than once' },
  DUPLICATE_AUTHORIZATION: { status: 400, message: 'Bad request: the Authorization header is given more than once' },
  /** pipeline/gateway.ts, pipeline/plain-upgrade.ts: dropping a hop-by-hop framing header would change where the request ends. */
  CONNECTION_NAMES_FRAMING: {
    status: 400,
    message: 'Bad request: the Connection header names Content-Length, Transfer-Encoding or Host',
  },
  FORBIDDEN: { status: 403, message: 'Forbidden' },
  REQUEST_TIMEOUT: { status: 408, message: 'Request timeout' },
  /** http/body-rate.ts: the body arrived slower than server.minBodyRate for longer than its grace period. */
  BODY_TOO_SLOW: { status: 408, message: 'Request timeout: the body arrives too slowly' },
  PAYLOAD_TOO_LARGE: { status: 413, message: 'Payload too large' },
  /** rails/body-peek.ts: a counted multipart field (token, _method, param: rule) came after the first file part. */
  PARAM_AFTER_FILE: {
    status: 400,
    message:
      'Request body not accepted: send access_token, bearer_token, _method and other counted fields before the first file part',
  },
  HEADERS_TOO_LARGE: { status: 431, message: 'Request header fields too large' },
  RATE_LIMITED: { status: 429, message: 'Too many requests' },
  /** proxy/admission.ts: the client already holds server.maxUpstreamConnectionsPerIp upstream connections. */
  TOO_MANY_IN_FLIGHT: { status: 429, message: 'Too many requests' },
  UPSTREAM_UNREACHABLE: { status: 502, message: 'Upstream unreachable' },
  UPSTREAM_RESET: { status: 502, message: 'Upstream connection reset' },
  STORE_UNAVAILABLE: { status: 503, message: 'Rate limit store unavailable' },
  SHUTTING_DOWN: { status: 503, message: 'Shutting down' },
  /** proxy/admission.ts: no upstream connection came free within server.upstreamQueueTimeout. */
  UPSTREAM_BUSY: { status: 503, message: 'Upstream busy' },
  UPSTREAM_TIMEOUT: { status: 504, message: 'Upstream timed out' },
  INTERNAL: { status: 500, message: 'Internal gateway error' },
} as const satisfies Record<string, { status: number; message: string }>;

export type GatewayErrorCode = keyof typeof GATEWAY_ERRORS;

/**
 * The two answers SPEC spells byte for byte, `403 {"error":"Forbidden"}` (Mastodon's IP blocks, bans)
 * and `429 {"error":"Too many requests"}`: clients and their tests compare them whole, so no code is added.
 */
const SPELLED_BY_SPEC: ReadonlySet<GatewayErrorCode> = new Set(['FORBIDDEN', 'RATE_LIMITED']);

/** Pre-serialized bodies: the error path allocates no JSON per request. */
export const ERROR_BODIES: Record<GatewayErrorCode, Buffer> = Object.fromEntries(
  Object.entries(GATEWAY_ERRORS).map(([code, e]) => [code, errorBody(code as GatewayErrorCode, e.message)]),
) as Record<GatewayErrorCode, Buffer>;

/** Failures of the client's own request found while forwarding it: not the upstream's fault. */
export function isClientFault(code: GatewayErrorCode): boolean {
  return code === 'PAYLOAD_TOO_LARGE' || code === 'PARAM_AFTER_FILE' || code === 'BODY_TOO_SLOW';
}

/**
 * Answers the forwarder makes although the upstream did not fail: the client's own fault, or the
 * admission to the upstream pool (busy, or the client's share taken). Not upstream errors in metrics.
 */
export function isGatewayAnswer(code: GatewayErrorCode): boolean {
  return isClientFault(code) || code === 'UPSTREAM_BUSY' || code === 'TOO_MANY_IN_FLIGHT';
}

/** The `reason` labels of `rategate_upstream_errors_total`, all known in advance (so they start at 0). */
export const UPSTREAM_ERROR_REASONS = ['unreachable', 'reset', 'timeout', 'bad_request'] as const;

/** The `reason` label of `rategate_upstream_errors_total` for an upstream failure. */
export function upstreamErrorReason(code: GatewayErrorCode): (typeof UPSTREAM_ERROR_REASONS)[number] {
  return code === 'UPSTREAM_TIMEOUT'
    ? 'timeout'
    : code === 'UPSTREAM_RESET'
      ? 'reset'
      : code === 'BAD_REQUEST'
        ? 'bad_request'
        : 'unreachable';
}

const JSON_TYPE = 'application/json; charset=utf-8';

/** A JSON answer on a response; `extra` are flat name/value pairs (the rate-limit headers). */
/** The head of a JSON answer kept for reuse (pipeline/refusal-head.ts): its type and length, then `extra`. */
export function jsonHead(body: Buffer, extra: readonly string[]): string[] {
  const head: string[] = ['Content-Type', JSON_TYPE, 'Content-Length', String(body.length)];
  for (const h of extra) head.push(h);
  return head;
}

/** A JSON answer whose whole head was built before (jsonHead): written as is, the connection kept. */
export function respondWithHead(res: http.ServerResponse, status: number, head: readonly string[], body: Buffer): void {
  // writeHead takes a mutable array in its types only: node reads the pairs, never changes them.
  res.writeHead(status, head as string[]);
  res.end(body);
}

export function respondJson(
  res: http.ServerResponse,
  status: number,
  body: Buffer,
  extra: readonly string[],
  close = false,
): void {
  const headers: string[] = ['Content-Type', JSON_TYPE, 'Content-Length', String(body.length)];
  for (const h of extra) headers.push(h);
  const stream = close ? h2Stream(res) : undefined;
  if (close && stream === undefined) headers.push('Connection', 'close');
  res.writeHead(status, headers);
  res.end(body);
  // HTTP/2 has no Connection header (node drops it with a warning): the stream alone is ended, its
  // unread body refused with RST_STREAM(NO_ERROR) once the answer is out (RFC 9113 §8.1).
  if (stream !== undefined) res.once('finish', () => stream.close(h2.NGHTTP2_NO_ERROR));
}

/** The stream of an HTTP/2 exchange's response (http/h2.ts); undefined for HTTP/1.1. */
function h2Stream(res: http.ServerResponse): Http2ServerResponse['stream'] | undefined {
  const r: unknown = res;
  return r instanceof Http2ServerResponse ? r.stream : undefined;
}

export function respondError(
  res: http.ServerResponse,
  code: GatewayErrorCode,
  extra: readonly string[],
  close = false,
): void {
  respondJson(res, GATEWAY_ERRORS[code].status, ERROR_BODIES[code], extra, close);
}

/**
 * A JSON answer written as raw HTTP/1.1 on a socket that has no ServerResponse (a client error, an
 * upgrade request), then the socket is closed: nothing more will be read from it.
 */
export function respondOnSocket(socket: Duplex, status: number, body: Buffer, extra: readonly string[]): void {
  if (socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\nContent-Type: ${JSON_TYPE}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n`;
  for (let i = 0; i < extra.length; i += 2) head += `${extra[i]}: ${extra[i + 1]}\r\n`;
  socket.end(Buffer.concat([Buffer.from(`${head}\r\n`), body]));
}

/**
 * A `{"error": …, "code": …}` body: the message for a person, the catalogue's code for a program (beside
 * "error", as fastify writes its own); `message` may be made per request (a reason, a parameter name).
 * The two SPEC spells exactly are `{"error": …}` alone.
 */
export function errorBody(code: GatewayErrorCode, message: string): Buffer {
  return Buffer.from(JSON.stringify(SPELLED_BY_SPEC.has(code) ? { error: message } : { error: message, code }));
}

/** A body for a bad path, naming what was wrong with it. */
export function badPathBody(reason: string): Buffer {
  return errorBody('BAD_PATH', `${GATEWAY_ERRORS.BAD_PATH.message}: ${reason}`);
}

/** The message for a counted parameter given twice with different values (query and body, or twice). */
export function paramConflictMessage(name: string): string {
  return `Bad request: ${name} is given twice with different values`;
}

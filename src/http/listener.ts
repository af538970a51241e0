/**
 * @module The proxy's node:http listener, hardened against hostile clients, and the listen/address
 * helpers every listener (proxy, admin, the cluster primary's admin) shares.
 */
import http from 'node:http';
import https from 'node:https';
import tls from 'node:tls';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { ERROR_BODIES, GATEWAY_ERRORS, respondOnSocket, type GatewayErrorCode } from './errors.js';
import { chunkBoundMessage } from './chunk-bound.js';

/**
 * The proxy listener, hardened against hostile clients: bounded head size (431), time to send the head
 * (slowloris) and the whole request (408), a connection cap, a body's chunks bounded by its bytes
 * (chunk-bound.ts), and garbage on the socket answered 400 and closed. None of these costs other clients
 * anything.
 */
/** The listener's limits (the config's `server:` section). */
export interface ListenerLimits {
  readonly maxHeaderSize: number;
  readonly headersTimeout: number;
  readonly requestTimeout: number;
  readonly keepAliveTimeout: number;
  readonly maxConnections: number;
}

/** Why node:http's parser refused a connection's bytes (the refusal log's `refused` field). */
export type ParserRefusal = 'headers_too_large' | 'request_timeout' | 'unknown_method' | 'malformed';

/**
 * `onRefused`: told the status of each answer to a client error (the response metrics and the refusal
 * log), with the reason and the parser's own code; a connection reset by its client is no refusal.
 * `onFragmented`: told of each connection closed for a body in too many small chunks. `secure`: the
 * certificate of a TLS listener (server.tls); absent, plain HTTP. `offerH2`: ALPN offers `h2` before
 * `http/1.1` (http/h2.ts takes those connections).
 */
export function createProxyServer(
  s: ListenerLimits,
  handler: http.RequestListener,
  onRefused: (status: number, reason: ParserRefusal, code: string) => void,
  ServerResponse: typeof http.ServerResponse,
  onFragmented: () => void,
  secure?: tls.SecureContextOptions,
  offerH2 = false,
): http.Server {
  const options: http.ServerOptions = {
    ServerResponse,
    IncomingMessage: chunkBoundMessage(onFragmented),
    maxHeaderSize: s.maxHeaderSize,
    headersTimeout: s.headersTimeout,
    requestTimeout: s.requestTimeout,
    keepAliveTimeout: s.keepAliveTimeout,
    // Timeouts are enforced by a periodic sweep; the default 30 s would let slowloris hold sockets long.
    connectionsCheckingInterval: Math.min(1000, s.headersTimeout),
  };
  // A handshake is held no longer than a head may take to arrive (node's default is 120 s: slowloris over TLS).
  const server =
    secure === undefined
      ? http.createServer(options, handler)
      : https.createServer(
          {
            ...options,
            ...secure,
            handshakeTimeout: s.headersTimeout,
            ALPNProtocols: offerH2 ? ['h2', 'http/1.1'] : ['http/1.1'],
          },
          handler,
        );
  server.maxConnections = s.maxConnections;
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    const code: GatewayErrorCode =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? 'HEADERS_TOO_LARGE'
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? 'REQUEST_TIMEOUT'
          : 'BAD_REQUEST';
    if (err.code === 'ECONNRESET') return void socket.destroy();
    onRefused(GATEWAY_ERRORS[code].status, parserRefusal(err.code), err.code ?? 'unknown');
    if (!answerInFlight(socket)) respondOnSocket(socket, GATEWAY_ERRORS[code].status, ERROR_BODIES[code], []);
  });
  return server;
}

function parserRefusal(code: string | undefined): ParserRefusal {
  if (code === 'HPE_HEADER_OVERFLOW') return 'headers_too_large';
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return 'request_timeout';
  return code === 'HPE_INVALID_METHOD' ? 'unknown_method' : 'malformed';
}

export function listenOn(server: http.Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

export function urlOf(server: http.Server): string {
  const a = server.address() as AddressInfo;
  const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
  return `${server instanceof tls.Server ? 'https' : 'http'}://${host}:${a.port}`;
}

/**
 * Bytes after a request that cannot be parsed (a body sent without framing) while that request is being
 * answered: its answer goes out alone and then the connection closes. A 400 written now would reach the
 * client before that answer (read as the answer to its request) or after a `Connection: close`. Node's
 * own default handler checks the same in-flight response (`_httpMessage`, which it has kept for years).
 */
function answerInFlight(socket: Duplex): boolean {
  const res = (socket as Duplex & { _httpMessage?: http.ServerResponse | null })._httpMessage;
  if (res == null) return false;
  res.shouldKeepAlive = false; // too late once its head is written: then closed when it finishes
  res.once('finish', () => socket.end());
  return true;
}

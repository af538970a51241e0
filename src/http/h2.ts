/**
 * @module HTTP/2 on the proxy listener: ALPN `h2` on the TLS listener and prior knowledge (h2c) on the
 * plain one, each connection handed to one node:http2 server whose requests take the HTTP/1.1 path: the
 * gateway's pipeline sees the same request shape (no pseudo-headers, a Host, one Cookie, a body declared
 * as HTTP/1.1 would declare it), so it decides, answers and forwards (HTTP/1.1 upstream) as for HTTP/1.1.
 * Bounded as the HTTP/1.1 edge is: streams per connection, header list size, the whole request's time,
 * the body's chunks, and the floods HTTP/2 adds (rapid reset, CONTINUATION, SETTINGS, PING).
 */
import type http from 'node:http';
import type https from 'node:https';
import http2 from 'node:http2';
import type net from 'node:net';
import type tls from 'node:tls';
// The module's binding, not the global: globalThis.performance is a getter, called on every use.
import { performance } from 'node:perf_hooks';
import { ERROR_BODIES, respondJson } from './errors.js';
import { FREE_CHUNKS, tooFragmented } from './chunk-bound.js';

/** The HTTP/1.1 listener's limits that HTTP/2 streams get too (the config's `server:` section). */
export interface H2Limits {
  readonly maxHeaderSize: number;
  readonly requestTimeout: number;
  readonly keepAliveTimeout: number;
}

/** Why a connection was closed by a bound of the gateway's own (the others are node:http2's). */
export type H2Closure = 'rapid_reset' | 'control_flood' | 'fragmented_body';

/** Streams one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS): more are refused by the peer's own stack. */
export const MAX_CONCURRENT_STREAMS = 100;
/**
 * Rapid reset (CVE-2023-44487): each stream a client opens and resets at once costs the gateway a
 * request (a decision, perhaps an upstream exchange begun) and the client nearly nothing. A browser
 * cancels a stream now and then (a page left, a fetch aborted): a connection may reset RESET_BURST
 * streams at once, and RESET_RATE a second after that; past it the connection is closed with GOAWAY.
 */
export const RESET_BURST = 200;
export const RESET_RATE = 50;
/**
 * SETTINGS and PING floods: each owes the client an acknowledgement, which node writes at once whether or
 * not the client reads them (nghttp2's own bound on owed ACKs never sees them), so a client that never
 * reads makes the gateway hold them all. A client sends a handful (a SETTINGS at the start, a PING to
 * probe a quiet connection): CONTROL_BURST at once and CONTROL_RATE a second after that, then GOAWAY.
 */
export const CONTROL_BURST = 500;
export const CONTROL_RATE = 20;

const { NGHTTP2_CANCEL, NGHTTP2_ENHANCE_YOUR_CALM } = http2.constants;

/** The bytes every HTTP/2 connection with prior knowledge opens with (RFC 9113 §3.4). */
export const H2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/**
 * A request as the HTTP/1.1 pipeline reads it: pseudo-headers left out, `:authority` as Host, the
 * Cookie fields an HTTP/2 client may split joined with "; " (RFC 9113 §8.2.3: what a hop to HTTP/1.1
 * must do), and a body the HEADERS frame did not end without a length declared as chunked (it is
 * counted as it streams, as a chunked HTTP/1.1 body is). Its body's chunks are bounded as chunk-bound.ts
 * bounds HTTP/1.1's, and its bytes counted for the body-rate watch (the connection's bytes are all
 * streams' bytes).
 */
class H2Request extends http2.Http2ServerRequest {
  /** Bytes of this stream's body so far (http/body-rate.ts reads it). */
  bodyBytesRead = 0;
  private chunks = 0;
  private cut = false;

  constructor(
    stream: http2.ServerHttp2Stream,
    headers: http2.IncomingHttpHeaders,
    options: Record<string, unknown>,
    rawHeaders: readonly string[],
  ) {
    super(stream, headers, options, rawHeaders);
    const raw: string[] = [];
    let cookie: string | undefined;
    let host = false;
    for (let i = 0; i < rawHeaders.length; i += 2) {
      const name = rawHeaders[i]!;
      if (name.charCodeAt(0) === 0x3a) continue; // ':'
      if (name === 'cookie') {
        cookie = cookie === undefined ? rawHeaders[i + 1]! : `${cookie}; ${rawHeaders[i + 1]!}`;
        continue;
      }
      if (name === 'host') host = true;
      raw.push(name, rawHeaders[i + 1]!);
    }
    const h: http.IncomingHttpHeaders = {};
    for (const name in headers) if (name.charCodeAt(0) !== 0x3a) h[name] = headers[name] as string;
    const authority = headers[':authority'];
    if (!host && typeof authority === 'string') {
      raw.unshift('host', authority);
      h.host = authority;
    }
    if (cookie !== undefined) {
      raw.push('cookie', cookie);
      h.cookie = cookie;
    }
    if (h['content-length'] === undefined && !stream.endAfterHeaders) h['transfer-encoding'] = 'chunked';
    // Own properties over the prototype's getters (which read the HTTP/2 fields): built once, read often.
    Object.defineProperty(this, 'headers', { value: h });
    Object.defineProperty(this, 'rawHeaders', { value: raw });
  }

  override push(chunk: unknown, encoding?: BufferEncoding): boolean {
    if (chunk === null) return super.push(chunk, encoding);
    if (this.cut) return false;
    this.bodyBytesRead += (chunk as Buffer).length;
    if (++this.chunks > FREE_CHUNKS && tooFragmented(this.chunks, this.bodyBytesRead)) {
      this.cut = true;
      const session = this.stream.session;
      if (session !== undefined) closeFor(session, 'fragmented_body');
      return false;
    }
    return super.push(chunk, encoding);
  }
}

/** node:http2's response, with `destroyed` (the pipeline's "the client left" test), which it lacks. */
class H2Response extends http2.Http2ServerResponse {}
Object.defineProperty(H2Response.prototype, 'destroyed', {
  get(this: H2Response) {
    return this.stream.destroyed;
  },
});

/** A token bucket of one connection's resets or control frames: its level and when it was last filled. */
interface Bucket {
  level: number;
  at: number;
}

/** Per connection: its streams open, its resets and its SETTINGS and PINGs. */
interface SessionState {
  open: number;
  readonly resets: Bucket;
  readonly control: Bucket;
  onClosed: ((reason: H2Closure) => void) | null;
}

/** One more in `b`, drained at `rate` a second: whether it is now past `burst`. */
function overflows(b: Bucket, rate: number, burst: number): boolean {
  const now = performance.now();
  b.level = Math.max(0, b.level - ((now - b.at) / 1000) * rate) + 1;
  b.at = now;
  return b.level > burst;
}

const STATE = new WeakMap<http2.Http2Session, SessionState>();

/** Closes `session` with GOAWAY(ENHANCE_YOUR_CALM) and then its socket, once; told to the metric. */
function closeFor(session: http2.Http2Session, reason: H2Closure): void {
  const state = STATE.get(session);
  if (state?.onClosed == null || session.destroyed) return;
  const told = state.onClosed;
  state.onClosed = null;
  told(reason);
  session.goaway(NGHTTP2_ENHANCE_YOUR_CALM);
  session.destroy();
}

export interface H2Edge {
  readonly server: http2.Http2Server;
  /** Connections speaking HTTP/2 now. */
  readonly sessions: ReadonlySet<http2.ServerHttp2Session>;
  /** The drain: each connection told GOAWAY (no new streams; those open finish). */
  goawayAll(): void;
  /** The drain's end: every connection closed. */
  destroyAll(): void;
}

/**
 * The HTTP/2 server the listener hands its h2 connections to. `handler` is the gateway's request
 * listener (also for `Expect: 100-continue`); `onClosed` is told of each connection closed by a bound.
 */
export function createH2Edge(
  limits: H2Limits,
  handler: http.RequestListener,
  onClosed: (reason: H2Closure) => void,
): H2Edge {
  const sessions = new Set<http2.ServerHttp2Session>();
  // The compat request and response carry what the pipeline reads of http's (H2Request, H2Response):
  // one handler serves both, typed as node:http's.
  const serve = handler as unknown as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void;
  const onRequest = (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse): void => {
    // CONNECT (a tunnel, RFC 9113 §8.5) is not a request the gateway forwards; HTTP/1.1 closes it too.
    if (req.method === 'CONNECT')
      return respondJson(res as unknown as http.ServerResponse, 400, ERROR_BODIES.BAD_REQUEST, [], true);
    serve(req, res);
  };
  const server = http2.createServer(
    {
      Http2ServerRequest: H2Request as typeof http2.Http2ServerRequest,
      Http2ServerResponse: H2Response,
      settings: {
        maxConcurrentStreams: MAX_CONCURRENT_STREAMS,
        maxHeaderListSize: limits.maxHeaderSize,
        enablePush: false,
      },
      // The HTTP/1.1 head bound is on bytes; HTTP/2 also counts fields (node's default 128 is too few for
      // some browsers' requests with many cookies split).
      maxHeaderListPairs: 256,
      // Frames that break the protocol, streams refused past the stream bound, and PINGs the peer did
      // not wait for (a SETTINGS flood: nghttp2's bound on ACKs owed): past these the connection is closed (node and nghttp2 close it with GOAWAY).
      maxSessionInvalidFrames: 100,
      maxSessionRejectedStreams: 100,
      maxOutstandingPings: 10,
      maxSettings: 32,
    },
    onRequest,
  );
  server.on('checkContinue', onRequest);
  server.on('session', (session: http2.ServerHttp2Session) => {
    sessions.add(session);
    const state: SessionState = { open: 0, resets: { level: 0, at: 0 }, control: { level: 0, at: 0 }, onClosed };
    STATE.set(session, state);
    // An idle connection is closed as an idle HTTP/1.1 keep-alive connection is; one waiting on a
    // stream's answer is not idle, however quiet.
    session.setTimeout(limits.keepAliveTimeout, () => {
      if (state.open === 0) session.close();
    });
    session.on('error', () => session.destroy());
    const onControl = (): void => {
      if (overflows(state.control, CONTROL_RATE, CONTROL_BURST)) closeFor(session, 'control_flood');
    };
    session.on('ping', onControl);
    session.on('remoteSettings', onControl);
    session.once('close', () => sessions.delete(session));
  });
  server.on('stream', (stream: http2.ServerHttp2Stream) => {
    const session = stream.session;
    const state = session === undefined ? undefined : STATE.get(session);
    if (state === undefined) return;
    state.open++;
    stream.on('error', () => stream.destroy());
    stream.once('aborted', () => {
      if (overflows(state.resets, RESET_RATE, RESET_BURST)) closeFor(session!, 'rapid_reset');
    });
    stream.once('close', () => state.open--);
    if (!stream.endAfterHeaders && limits.requestTimeout > 0) boundRequestTime(stream, limits.requestTimeout);
  });
  return {
    server,
    sessions,
    goawayAll: () => {
      for (const s of sessions) if (!s.closed) s.close();
    },
    destroyAll: () => {
      for (const s of sessions) s.destroy();
    },
  };
}

/**
 * server.requestTimeout for a stream with a body: the whole request must have arrived within it, or the
 * stream is reset (CANCEL) and whatever was made of it stops, as node:http closes an HTTP/1.1 connection
 * then. Not a 408: the answer may be on its way from the upstream already, and HTTP/2 has one head per
 * stream. One timer per stream that has a body; none for the GETs.
 */
function boundRequestTime(stream: http2.ServerHttp2Stream, ms: number): void {
  const timer = setTimeout(() => {
    if (!stream.destroyed) stream.close(NGHTTP2_CANCEL);
  }, ms);
  timer.unref();
  const clear = (): void => clearTimeout(timer);
  stream.once('end', clear);
  stream.once('close', clear);
}

/**
 * The TLS listener's connections by what ALPN chose: `h2` to the HTTP/2 server, the rest (`http/1.1`,
 * or a client that offered no ALPN) to node:https's own listener, as before.
 */
export function serveH2OnAlpn(server: https.Server, h2: H2Edge): void {
  const http1 = server.listeners('secureConnection') as Array<(socket: tls.TLSSocket) => void>;
  server.removeAllListeners('secureConnection');
  server.on('secureConnection', (socket: tls.TLSSocket) => {
    if (socket.alpnProtocol === 'h2') return void h2.server.emit('connection', socket);
    for (const listener of http1) listener.call(server, socket);
  });
}

/**
 * HTTP/2 with prior knowledge on the plain listener: a connection that opens with the preface goes to the
 * HTTP/2 server, any other to node:http's listener, as soon as a byte tells them apart (the first byte
 * for nearly every HTTP/1.1 request; `P` for POST, PUT and PATCH a few more). The bytes read are put
 * back for whoever reads the connection. A connection that sends nothing is closed after
 * `timeoutMs` (server.headersTimeout), as a head that does not come is.
 */
export function sniffH2Preface(server: http.Server, h2: H2Edge, timeoutMs: number): void {
  const http1 = server.listeners('connection') as Array<(socket: net.Socket) => void>;
  server.removeAllListeners('connection');
  const toHttp1 = (socket: net.Socket): void => {
    for (const listener of http1) listener.call(server, socket);
  };
  server.on('connection', (socket: net.Socket) => {
    let held: Buffer = Buffer.alloc(0);
    const timer = setTimeout(() => socket.destroy(), timeoutMs);
    const stop = (): void => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('error', onError);
      socket.off('close', stop);
    };
    const handTo = (to: (socket: net.Socket) => void, resume: boolean): void => {
      stop();
      socket.pause();
      socket.unshift(held);
      to(socket);
      // node:http2 reads what is buffered itself (on the next tick) and then the socket's handle: a
      // flowing socket would hand those bytes to nobody.
      if (resume) socket.resume();
    };
    const onData = (chunk: Buffer): void => {
      held = held.length === 0 ? chunk : Buffer.concat([held, chunk]);
      const n = Math.min(held.length, H2_PREFACE.length);
      if (!held.subarray(0, n).equals(H2_PREFACE.subarray(0, n))) return handTo(toHttp1, true);
      if (held.length >= H2_PREFACE.length) handTo((s) => h2.server.emit('connection', s), false);
    };
    const onError = (): void => {
      stop();
      socket.destroy();
    };
    socket.on('data', onData);
    socket.once('error', onError);
    socket.once('close', stop);
  });
}

/**
 * @module HTTP/2 on the proxy listener: ALPN `h2` on the TLS listener and prior knowledge (h2c) on the
 * plain one, each connection handed to one node:http2 server whose requests take the HTTP/1.1 path: the
 * gateway's pipeline sees the same request shape (no pseudo-headers, a Host, one Cookie, a body declared
 * as HTTP/1.1 would declare it), so it decides, answers and forwards (HTTP/1.1 upstream) as for HTTP/1.1.
 * Bounded as the HTTP/1.1 edge is: streams per connection, header list size, the whole request's time,
 * the body's chunks, and the floods HTTP/2 adds (rapid reset, CONTINUATION, SETTINGS, PING). The request
 * and response: h2-request.ts; the flood bounds: h2-floods.ts; handing connections over: h2-handoff.ts.
 */
import type http from 'node:http';
import http2 from 'node:http2';
import { ERROR_BODIES, respondJson } from './errors.js';
import {
  CONTROL_BURST,
  CONTROL_RATE,
  RESET_BURST,
  RESET_RATE,
  STATE,
  closeFor,
  overflows,
  type H2Closure,
  type SessionState,
} from './h2-floods.js';
import { H2Request, H2Response } from './h2-request.js';

export { CONTROL_BURST, CONTROL_RATE, RESET_BURST, RESET_RATE, type H2Closure } from './h2-floods.js';

/** The HTTP/1.1 listener's limits that HTTP/2 streams get too (the config's `server:` section). */
export interface H2Limits {
  readonly maxHeaderSize: number;
  readonly requestTimeout: number;
  readonly keepAliveTimeout: number;
}

/** Streams one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS): more are refused by the peer's own stack. */
export const MAX_CONCURRENT_STREAMS = 100;

const { NGHTTP2_CANCEL } = http2.constants;

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
  server.on('session', (session: http2.ServerHttp2Session) => watchSession(session, sessions, limits, onClosed));
  server.on('stream', (stream: http2.ServerHttp2Stream) => watchStream(stream, limits));
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

/** A new connection: counted among the sessions, its state kept, closed when idle, its control frames bounded. */
function watchSession(
  session: http2.ServerHttp2Session,
  sessions: Set<http2.ServerHttp2Session>,
  limits: H2Limits,
  onClosed: (reason: H2Closure) => void,
): void {
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
}

/** A new stream: counted open on its connection, its resets bounded, its body's time bounded. */
function watchStream(stream: http2.ServerHttp2Stream, limits: H2Limits): void {
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

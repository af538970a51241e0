/**
 * @module The HTTP/2 floods the gateway bounds per connection (rapid reset, SETTINGS and PING floods, a
 * body in crumbs): each connection's token buckets, and closing it with GOAWAY(ENHANCE_YOUR_CALM) once.
 */
import http2 from 'node:http2';
// The module's binding, not the global: globalThis.performance is a getter, called on every use.
import { performance } from 'node:perf_hooks';

/** Why a connection was closed by a bound of the gateway's own (the others are node:http2's). */
export type H2Closure = 'rapid_reset' | 'control_flood' | 'fragmented_body';

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

const { NGHTTP2_ENHANCE_YOUR_CALM } = http2.constants;

/** A token bucket of one connection's resets or control frames: its level and when it was last filled. */
interface Bucket {
  level: number;
  at: number;
}

/** Per connection: its streams open, its resets and its SETTINGS and PINGs. */
export interface SessionState {
  open: number;
  readonly resets: Bucket;
  readonly control: Bucket;
  onClosed: ((reason: H2Closure) => void) | null;
}

/** One more in `b`, drained at `rate` a second: whether it is now past `burst`. */
export function overflows(b: Bucket, rate: number, burst: number): boolean {
  const now = performance.now();
  b.level = Math.max(0, b.level - ((now - b.at) / 1000) * rate) + 1;
  b.at = now;
  return b.level > burst;
}

export const STATE = new WeakMap<http2.Http2Session, SessionState>();

/** Closes `session` with GOAWAY(ENHANCE_YOUR_CALM) and then its socket, once; told to the metric. */
export function closeFor(session: http2.Http2Session, reason: H2Closure): void {
  const state = STATE.get(session);
  if (state?.onClosed == null || session.destroyed) return;
  const told = state.onClosed;
  state.onClosed = null;
  told(reason);
  session.goaway(NGHTTP2_ENHANCE_YOUR_CALM);
  session.destroy();
}

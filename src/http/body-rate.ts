/**
 * @module The minimum body rate (`server.minBodyRate`, `server.minBodyRateGrace`): a request body that
 * arrives slower than `minBodyRate` bytes/s over a span of `minBodyRateGrace` while the gateway is
 * reading it is answered 408 and its connection closed. Without it, a client sending one byte every
 * few seconds holds its connection (and, once forwarded, an upstream connection) for the whole
 * `requestTimeout`. One sweep a second looks at every body still arriving: nothing runs per chunk.
 */
// The module's binding, not the global: globalThis.performance is a getter, called on every use.
import { performance } from 'node:perf_hooks';
import type http from 'node:http';
import type { Readable } from 'node:stream';
import { RategateError } from '../errors.js';
import { ERROR_BODIES, GATEWAY_ERRORS, respondJson } from './errors.js';
import { expectsContinue } from './expect-continue.js';
import { declaresBody } from './message.js';

/** The body arrived too slowly: the exchange that forwards it answers 408. */
export class BodyTooSlowError extends RategateError {
  readonly code = 'BODY_TOO_SLOW';
}

/** Read at each sweep (a reload applies at once). */
export interface BodyRateLimits {
  /** Bytes per second; 0: no minimum. */
  readonly minBodyRate: number;
  /** Milliseconds: the span over which the rate is measured, and the slow start allowed. */
  readonly minBodyRateGrace: number;
}

/** One body still arriving. */
interface Upload {
  readonly req: http.IncomingMessage;
  readonly res: http.ServerResponse;
  /** The stream the forwarder sends upstream, once it does: failing it makes the exchange answer. */
  target: Readable | null;
  /** Start of the span being measured, and the connection's bytes read then. */
  since: number;
  bytesThen: number;
}

const UPLOAD = Symbol('rategate.upload');
type WatchedRequest = http.IncomingMessage & { [UPLOAD]?: Upload };

/** How often bodies are looked at: the grace period is met to within this. */
const SWEEP_MS = 1000;

export class BodyRateWatch {
  private readonly uploads = new Set<Upload>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly limits: () => BodyRateLimits,
    /** Told of each body cut (a metric). */
    private readonly onSlow: () => void = () => undefined,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Watches the body of `req` until it has arrived. Every request comes here: one without a body costs a header read. */
  watch(req: http.IncomingMessage, res: http.ServerResponse): void {
    if (!declaresBody(req) || req.complete || this.limits().minBodyRate === 0) return;
    const u: Upload = { req, res, target: null, since: this.now(), bytesThen: bytesRead(req) };
    (req as WatchedRequest)[UPLOAD] = u;
    this.uploads.add(u);
    if (this.timer === null) {
      this.timer = setInterval(sweepNow, SWEEP_MS, this);
      // Bodies in progress keep the process alive by their sockets, not by this timer.
      this.timer.unref();
    }
  }

  /** Bodies being watched (tests: a finished body is let go). */
  get size(): number {
    return this.uploads.size;
  }

  /** One look at every body still arriving; exported for tests, which drive the clock. */
  sweep(): void {
    const { minBodyRate, minBodyRateGrace } = this.limits();
    const now = this.now();
    for (const u of this.uploads) {
      const { req } = u;
      if (req.complete || req.destroyed || minBodyRate === 0) {
        this.uploads.delete(u);
        continue;
      }
      const bytes = bytesRead(req);
      if (!waitingOnClient(u)) {
        // The gateway is not reading (a full buffer: the upstream or the decision is slower than the
        // client), or the client is waiting for its `100 Continue`: not the client's time.
        u.since = now;
        u.bytesThen = bytes;
        continue;
      }
      const span = now - u.since;
      if (span < minBodyRateGrace) continue;
      if (bytes - u.bytesThen >= (minBodyRate * span) / 1000) {
        u.since = now;
        u.bytesThen = bytes;
        continue;
      }
      this.uploads.delete(u);
      this.cut(u);
    }
    if (this.uploads.size === 0 && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  private cut(u: Upload): void {
    this.onSlow();
    const { res, target } = u;
    // Forwarding: the exchange hears the failure and answers 408 (or cuts an answer already begun).
    if (target !== null && !target.destroyed)
      return void target.destroy(new BodyTooSlowError('request body arrives too slowly'));
    // Before that (a body read for the decision, a decision still pending): answered here, and the
    // pipeline sees the answer made. The connection closes after it, so nothing more is read.
    if (!res.headersSent) respondJson(res, GATEWAY_ERRORS.BODY_TOO_SLOW.status, ERROR_BODIES.BODY_TOO_SLOW, [], true);
    else u.req.socket.destroy();
  }
}

/** The forwarder's stream for `req`'s body: a body too slow from now on fails it, and the exchange answers. */
export function forwardingBody(req: http.IncomingMessage, target: Readable): void {
  const u = (req as WatchedRequest)[UPLOAD];
  if (u !== undefined) u.target = target;
}

function sweepNow(watch: BodyRateWatch): void {
  watch.sweep();
}

/**
 * Bytes read from the client's connection so far (the body's progress; a pipelined request after it
 * counts too); on HTTP/2, the stream's own body bytes (http/h2.ts): the connection's are every stream's.
 */
function bytesRead(req: http.IncomingMessage): number {
  return (req as { bodyBytesRead?: number }).bodyBytesRead ?? req.socket?.bytesRead ?? 0;
}

/**
 * Whether the client is the one to send now: node:http stops reading a connection once the body's
 * buffer is full, and a client asked for `Expect: 100-continue` sends nothing until it is told to.
 */
function waitingOnClient(u: Upload): boolean {
  const { req, res } = u;
  if (req.readableLength >= req.readableHighWaterMark) return false;
  return !expectsContinue(req) || (res as { sentContinue?: boolean }).sentContinue === true;
}

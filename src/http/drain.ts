/**
 * @module Graceful drain of the proxy listener: once draining, every response whose head is still to be
 * written says `Connection: close` (and its socket closes after it), idle keep-alive connections are
 * closed as they appear, and the drain ends when the last connection does — the grace period is an
 * upper bound, not a wait.
 */
import http from 'node:http';

export interface Drain {
  /** Given to `http.createServer({ ServerResponse })`: the response class that knows about the drain. */
  readonly ServerResponse: typeof http.ServerResponse;
  readonly draining: boolean;
  /**
   * True once the grace period has run out and the gateway closes the connections left: an exchange that
   * ends after this was cut by the gateway, not abandoned by its client.
   */
  readonly cut: boolean;
  /**
   * Stops accepting and resolves when every connection of `server` has closed, or after `graceMs`
   * (then the rest are closed, and `onTimeout` is called first). Idempotent. `sessions`: the listener's
   * HTTP/2 connections, which node:http does not close (http/h2.ts): told GOAWAY at once, closed at the end.
   */
  run(server: http.Server, graceMs: number, onTimeout: () => void, sessions?: MultiplexedConnections): Promise<void>;
}

/** Connections that carry many exchanges at once (HTTP/2): told to stop opening new ones, then closed. */
export interface MultiplexedConnections {
  goawayAll(): void;
  destroyAll(): void;
}

/** How often idle connections are looked for while draining: a response can end at any moment. */
const IDLE_SWEEP_MS = 50;

export function createDrain(): Drain {
  let draining = false;
  let cut = false;
  let running: Promise<void> | undefined;

  // One class per listener, made at start: the check costs the request path one boolean read when the
  // head is written, and nothing is allocated or registered per request.
  class DrainAwareResponse extends http.ServerResponse {}
  const writeHead = http.ServerResponse.prototype.writeHead;
  const base = writeHead as (this: http.ServerResponse, a: unknown, b: unknown, c: unknown) => http.ServerResponse;
  // writeHead(status, message?, headers?): three fixed arguments, so no rest array per response.
  DrainAwareResponse.prototype.writeHead = function (this: http.ServerResponse, a: unknown, b: unknown, c: unknown) {
    // Read by node:http when it stores the head: `Connection: close`, and the socket ends after.
    if (draining) this.shouldKeepAlive = false;
    return base.call(this, a, b, c);
  } as typeof writeHead;

  return {
    ServerResponse: DrainAwareResponse as typeof http.ServerResponse,
    get draining() {
      return draining;
    },
    get cut() {
      return cut;
    },
    run(server, graceMs, onTimeout, sessions) {
      if (running) return running;
      draining = true;
      running = new Promise<void>((resolve) => {
        // close() also closes the connections idle right now; the sweep catches those that become idle
        // later, e.g. one whose response head went out (keep-alive) before the drain began, and an
        // HTTP/2 connection whose preface was still arriving.
        const sweep = setInterval(() => {
          server.closeIdleConnections();
          sessions?.goawayAll();
        }, IDLE_SWEEP_MS);
        const timer = setTimeout(() => {
          cut = true;
          onTimeout();
          server.closeAllConnections();
          sessions?.destroyAll();
        }, graceMs);
        server.close(() => {
          clearInterval(sweep);
          clearTimeout(timer);
          resolve();
        });
        server.closeIdleConnections();
        sessions?.goawayAll();
      });
      return running;
    },
  };
}

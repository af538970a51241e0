/**
 * @module WebSocket upgrades: counted once, at the upgrade request, then tunnelled by http-proxy; a
 * limited upgrade gets a plain HTTP 429 and the socket is closed. Either side closing closes the other.
 */
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import httpProxy from 'http-proxy';
import { normalizePath } from '../routing/index.js';
import { badPathBody, forwardedFor, type Gateway } from '../server/gateway.js';
import { CLIENT_IP_CLAIMS } from './client-ip-headers.js';
import type { RequestPolicy } from '../server/policy.js';
import type { Metrics } from '../metrics.js';

const STATUS_TEXT: Record<number, string> = { 400: 'Bad Request', 429: 'Too Many Requests', 503: 'Service Unavailable' };

export function createUpgradeHandler(opts: {
  origin: string;
  gateway: Gateway;
  policy: () => RequestPolicy;
  metrics: Metrics;
}): UpgradeHandler {
  const open = new Set<Duplex>();
  const proxy = httpProxy.createProxyServer({ target: opts.origin, ws: true, xfwd: false });
  // A failed or reset tunnel: close the client side too, never leave a half-open socket behind.
  proxy.on('error', (_err, _req, socket) => {
    if (socket && 'destroy' in socket) (socket as Duplex).destroy();
  });

  const handler = (req: http.IncomingMessage, socket: Duplex, head: Buffer): void => {
    // Upgraded sockets leave the HTTP server's books: track them so shutdown can close them.
    open.add(socket);
    socket.once('close', () => open.delete(socket));
    socket.on('error', () => socket.destroy());
    void (async () => {
      const policy = opts.policy();
      const target = normalizePath(req.url ?? '');
      if (!target.ok) return refuse(socket, 400, badPathBody(target.reason), []);
      const d = await opts.gateway.decide(req, policy, req.method ?? 'GET', target.path);
      if (!d.admit) {
        opts.metrics.gatewayResponses.labels(String(d.status)).inc();
        return refuse(socket, d.status, d.body, d.headers);
      }
      if (socket.destroyed) return;
      req.url = target.path + target.query;
      const fwd = forwardedFor(req, policy);
      req.headers['x-forwarded-for'] = fwd.for;
      req.headers['x-forwarded-proto'] = fwd.proto;
      req.headers['x-forwarded-host'] = fwd.host;
      if (fwd.forwarded === undefined) delete req.headers.forwarded;
      else req.headers.forwarded = fwd.forwarded;
      if (!fwd.trusted) for (const name of CLIENT_IP_CLAIMS) delete req.headers[name];
      proxy.ws(req, socket, head);
    })().catch(() => socket.destroy());
  };
  return Object.assign(handler, {
    closeAll: () => {
      for (const s of open) s.destroy();
      proxy.close();
    },
  });
}

export type UpgradeHandler = ((req: http.IncomingMessage, socket: Duplex, head: Buffer) => void) & { closeAll(): void };

/** Answers an upgrade request with a plain HTTP response and closes the socket. */
function refuse(socket: Duplex, status: number, body: Buffer, headers: readonly string[]): void {
  if (socket.destroyed) return;
  let head = `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? 'Error'}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n`;
  for (let i = 0; i < headers.length; i += 2) head += `${headers[i]}: ${headers[i + 1]}\r\n`;
  socket.end(Buffer.concat([Buffer.from(`${head}\r\n`), body]));
}

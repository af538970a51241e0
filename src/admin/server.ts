/** @module The admin listener (never the proxy port): /metrics, /healthz, /readyz. */
import http from 'node:http';
import type { Metrics } from '../metrics.js';

export interface AdminOptions {
  metrics: Metrics;
  /** Config loaded, upstream and store reachable (or the store's fallback in force), not draining. */
  ready: () => Promise<boolean>;
}

export function createAdminServer(opts: AdminOptions): http.Server {
  return http.createServer((req, res) => {
    handle(opts, req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500, { 'Content-Type': 'application/json' });
      res.end('{"error":"Internal error"}');
    });
  });
}

async function handle(opts: AdminOptions, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const path = (req.url ?? '/').split('?')[0];
  if (req.method === 'GET' && path === '/metrics') {
    const body = await opts.metrics.registry.metrics();
    res.writeHead(200, { 'Content-Type': opts.metrics.registry.contentType });
    res.end(body);
    return;
  }
  if (req.method === 'GET' && path === '/healthz') {
    json(res, 200, { status: 'ok' });
    return;
  }
  if (req.method === 'GET' && path === '/readyz') {
    const ok = await opts.ready();
    json(res, ok ? 200 : 503, { status: ok ? 'ready' : 'not ready' });
    return;
  }
  json(res, 404, { error: 'Not found' });
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

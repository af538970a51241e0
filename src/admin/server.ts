/**
 * @module The one admin router (never the proxy port), for a single process and the cluster primary alike:
 * /metrics, /healthz, /readyz, and the token-guarded /admin/* API and status page (single process only).
 */
import http from 'node:http';
import { bucketsEndpoint } from './buckets.js';
import { guardEndpoint } from './guard-api.js';
import { BEARER_CHALLENGE, doorCheck } from './door.js';
import { STATUS_PATHS, serveStatus } from './status-route.js';
import { actorOf, auditFor } from './audit.js';
import { hostRefusal, writeRefusal } from './browser-check.js';
import type { AdminApi } from './api.js';
import { settleSocketShape } from '../http/socket-shape.js';

/** What /metrics serves: this process's registry, or the cluster primary's aggregate of its workers. */
export interface MetricsSource {
  readonly contentType: string;
  metrics(): Promise<string>;
}

export interface AdminOptions {
  metrics: MetricsSource;
  /** Config loaded, upstream reachable, not draining (and the store, when asked); `details` go into the body. */
  ready: () => Promise<{ ready: boolean; checks: Record<string, boolean>; details?: Record<string, unknown> }>;
  /** Extra fields of the /healthz body (the primary: how many workers listen). */
  health?: () => Record<string, unknown>;
  /** The /admin/* API; absent on the cluster primary, where those paths answer 404. */
  api?: AdminApi;
}

export function createAdminServer(opts: AdminOptions): http.Server {
  return http.createServer((req, res) => {
    settleSocketShape(req);
    handle(opts, req, res).catch((err: unknown) => {
      json(res, 500, { error: err instanceof Error ? err.message : 'Internal error' });
    });
  });
}

async function handle(opts: AdminOptions, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  // Split by hand: `new URL('//', base)` throws (a 500 `Invalid URL`), and a target that is not
  // origin-form (`*`, `http://…`) names nothing here.
  const target = req.url ?? '';
  if (target.charCodeAt(0) !== 0x2f /* / */) return json(res, 400, { error: 'Bad request target' });
  const q = target.indexOf('?');
  const path = q === -1 ? target : target.slice(0, q);
  if (req.method === 'GET' && path === '/metrics') {
    const body = await opts.metrics.metrics();
    res.writeHead(200, { 'Content-Type': opts.metrics.contentType });
    res.end(body);
    return;
  }
  if (req.method === 'GET' && path === '/healthz') return json(res, 200, { status: 'ok', ...opts.health?.() });
  if (req.method === 'GET' && path === '/readyz') {
    const r = await opts.ready();
    return json(res, r.ready ? 200 : 503, { status: r.ready ? 'ready' : 'not ready', checks: r.checks, ...r.details });
  }
  // Security: the door's paths carry IPs and change who is refused; a browser may not be made to reach them.
  const guarded = STATUS_PATHS.has(path) || path.startsWith('/admin/');
  const foreign =
    guarded && opts.api !== undefined
      ? hostRefusal(req, opts.api.names, opts.api.policy().snapshot.config.admin.allowedHosts)
      : null;
  if (foreign !== null) return json(res, foreign.status, { error: foreign.error });
  if (req.method === 'GET' && STATUS_PATHS.has(path))
    return serveStatus(opts.api, req, res, path, q === -1 ? '' : target.slice(q + 1));
  if (path.startsWith('/admin/')) {
    if (opts.api === undefined)
      return json(res, 404, { error: 'Not found (the buckets API is served by single-process mode only)' });
    return api(opts.api, req, res, path, q === -1 ? '' : target.slice(q + 1));
  }
  json(res, 404, { error: 'Not found' });
}

async function api(
  opts: AdminApi,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  path: string,
  query: string,
): Promise<void> {
  const policy = opts.policy();
  const method = req.method ?? 'GET';
  const door = doorCheck(
    { credentials: opts.credentials(), loopbackOnly: opts.loopbackOnly },
    req.headers.authorization,
    {
      write: method !== 'GET' && method !== 'HEAD',
    },
  );
  if (!door.pass) {
    if (door.status === 401) res.setHeader('WWW-Authenticate', BEARER_CHALLENGE);
    return json(res, door.status, { error: door.error });
  }
  // Security: after the door, so that a client without the token is told it needs one; before any body is read.
  const crossSite = writeRefusal(req);
  if (crossSite !== null) return json(res, crossSite.status, { error: crossSite.error });
  // URLSearchParams never throws: a bad escape such as `%zz` is kept as it is.
  const params = new URLSearchParams(query);
  const actor = actorOf(req, door.credential);
  const audit = auditFor(opts.log, actor);
  if (path === '/admin/buckets') {
    const a = await bucketsEndpoint(req.method ?? 'GET', params, policy, opts.store, opts.guard?.top);
    if (req.method === 'DELETE' && a.status === 200) {
      const b = a.body as { rule: string; key: string };
      audit('bucket.reset', { rule: b.rule, key: b.key }, `bucket reset ${b.key} of rule ${b.rule}`);
    }
    return json(res, a.status, a.body);
  }
  // A store that does not answer is the store's trouble, not the admin API's: 503 with its message.
  const g = opts.guard
    ? await guardEndpoint(req, path, params, policy, opts.guard, {
        store: opts.store,
        actor,
        audit,
        fleet: opts.fleet,
      }).catch((err: Error) => ({
        status: 503,
        body: { error: `store: ${err.message}` },
      }))
    : null;
  if (g !== null) return json(res, g.status, g.body);
  json(res, 404, { error: 'Not found' });
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) return void res.end();
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

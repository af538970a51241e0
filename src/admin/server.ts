/**
 * @module The one admin router (never the proxy port), for a single process and the cluster primary alike:
 * /metrics, /healthz, /readyz, and the token-guarded /admin/* API (single process only).
 */
import { timingSafeEqual, createHash } from 'node:crypto';
import http from 'node:http';
import type { Store } from '../limiter/types.js';
import type { RequestPolicy } from '../pipeline/policy.js';
import { bucketsEndpoint } from './buckets.js';
import { guardEndpoint } from './guard-api.js';
import type { Guard } from '../guard/guard.js';
import type { StoreLog } from '../limiter/types.js';
import { actorOf, auditFor } from './audit.js';

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

export interface AdminApi {
  policy: () => RequestPolicy;
  store: Store;
  /** Runtime blocks, exemptions, bans and triage (absent: those endpoints answer 404). */
  guard?: Guard;
  /** The admin token in force (see admin/token.ts), read per request so a reload can rotate it. */
  token: () => string | null;
  /** Whether the listener accepts connections from this host only (see isLoopbackListen). */
  loopbackOnly: boolean;
  /** Where the audit line of each admin write goes (absent: none is written). */
  log?: StoreLog;
}

/** Security: an open buckets API on a reachable port lets anyone reset their own limits. */
const NO_TOKEN_OFF_LOOPBACK =
  'the admin API is disabled: this listener is not loopback-only and no admin token is set (admin.token, RATEGATE_ADMIN_TOKEN or admin.tokenFile)';

export function createAdminServer(opts: AdminOptions): http.Server {
  return http.createServer((req, res) => {
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
  if (path.startsWith('/admin/')) {
    if (opts.api === undefined) return json(res, 404, { error: 'Not found (the buckets API is served by single-process mode only)' });
    return api(opts.api, req, res, path, q === -1 ? '' : target.slice(q + 1));
  }
  json(res, 404, { error: 'Not found' });
}

async function api(opts: AdminApi, req: http.IncomingMessage, res: http.ServerResponse, path: string, query: string): Promise<void> {
  const policy = opts.policy();
  const token = opts.token();
  if (token === null && !opts.loopbackOnly) return json(res, 403, { error: NO_TOKEN_OFF_LOOPBACK });
  if (token !== null && !bearerMatches(req.headers.authorization, token)) {
    res.setHeader('WWW-Authenticate', 'Bearer realm="rategate-admin"');
    return json(res, 401, { error: 'admin token required' });
  }
  // URLSearchParams never throws: a bad escape such as `%zz` is kept as it is.
  const params = new URLSearchParams(query);
  const actor = actorOf(req, opts.token());
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
    ? await guardEndpoint(req, path, params, policy, opts.guard, { store: opts.store, actor, audit }).catch((err: Error) => ({
        status: 503,
        body: { error: `store: ${err.message}` },
      }))
    : null;
  if (g !== null) return json(res, g.status, g.body);
  json(res, 404, { error: 'Not found' });
}

/** Constant-time comparison of digests, so response timing does not leak the token a byte at a time. */
function bearerMatches(header: string | undefined, token: string): boolean {
  const m = /^Bearer\s+(.+)$/i.exec(header ?? '');
  if (!m) return false;
  const a = createHash('sha256').update(m[1]!).digest();
  const b = createHash('sha256').update(token).digest();
  return timingSafeEqual(a, b);
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) return void res.end();
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

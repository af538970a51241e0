/**
 * @module The attack-day admin endpoints: runtime blocks and exemptions (`/admin/blocks`,
 * `/admin/exemptions`), bans (`/admin/bans`) and triage (`/admin/limited`). Writes go to the store, so
 * every replica applies them within a second (with the memory store: this process only).
 */
import type http from 'node:http';
import { parseDuration, formatDuration } from '../config/fields/duration.js';
import { checkIpOrCidr } from '../config/fields/validators.js';
import type { Guard } from '../guard/guard.js';
import type { EntryKind, GuardEntry } from '../guard/state.js';
import type { RequestPolicy } from '../pipeline/policy.js';

export type AdminAnswer = { status: number; body: unknown };

/** A runtime block or exemption without `for` lasts this long: runtime entries always end by themselves. */
export const DEFAULT_FOR_MS = 60 * 60_000;
/** Longer than this belongs in limits.yaml, where it is reviewed and versioned. */
export const MAX_FOR_MS = 30 * 24 * 60 * 60_000;
const MAX_BODY = 16 * 1024;
const MAX_TOP = 1_000;

const SECTIONS: Record<string, { kind: EntryKind; config: 'block' | 'exempt' }> = {
  '/admin/blocks': { kind: 'block', config: 'block' },
  '/admin/exemptions': { kind: 'exempt', config: 'exempt' },
};

/** The answer for a guard path, or null when `path` is not one of them. */
export async function guardEndpoint(
  req: http.IncomingMessage,
  path: string,
  params: URLSearchParams,
  policy: RequestPolicy,
  guard: Guard,
): Promise<AdminAnswer | null> {
  const method = req.method ?? 'GET';
  for (const [base, s] of Object.entries(SECTIONS)) {
    if (path === base) {
      if (method === 'GET') return { status: 200, body: await listEntries(guard, policy, s.kind) };
      if (method === 'POST') return addEntry(req, guard, s.kind);
      return { status: 405, body: { error: `use GET or POST on ${base}` } };
    }
    if (path.startsWith(base + '/')) {
      if (method !== 'DELETE') return { status: 405, body: { error: `use DELETE on ${base}/<ip-or-cidr>` } };
      const id = decode(path.slice(base.length + 1));
      if (id === null) return { status: 400, body: { error: 'bad escape in the path' } };
      if (policy.snapshot.config[s.config].ips.includes(id)) {
        return { status: 409, body: { error: `${id} is in limits.yaml (${s.config}.ips): remove it there` } };
      }
      await guard.refresh();
      if (!(await guard.state.remove(s.kind, id)))
        return { status: 404, body: { error: `no runtime ${s.kind === 'block' ? 'block' : 'exemption'} for ${id}` } };
      await guard.refresh();
      return { status: 200, body: { removed: id } };
    }
  }
  if (path === '/admin/bans') {
    if (method !== 'GET') return { status: 405, body: { error: 'use GET on /admin/bans' } };
    await guard.refresh();
    return {
      status: 200,
      body: {
        scope: guard.state.scope,
        bans: guard
          .entries()
          .filter((e) => e.kind === 'ban')
          .map(banJson),
      },
    };
  }
  if (path.startsWith('/admin/bans/')) {
    if (method !== 'DELETE') return { status: 405, body: { error: 'use DELETE on /admin/bans/<ban>/<key>' } };
    const rest = decode(path.slice('/admin/bans/'.length));
    const slash = rest?.indexOf('/') ?? -1;
    if (rest === null || slash <= 0 || slash === rest.length - 1)
      return { status: 400, body: { error: 'use DELETE /admin/bans/<ban>/<key> (as GET /admin/bans lists them)' } };
    if (!(await guard.state.remove('ban', rest))) return { status: 404, body: { error: `no ban ${rest.slice(0, slash)} on ${rest.slice(slash + 1)}` } };
    await guard.refresh();
    return { status: 200, body: { lifted: { ban: rest.slice(0, slash), key: rest.slice(slash + 1) } } };
  }
  if (path === '/admin/limited') {
    if (method !== 'GET') return { status: 405, body: { error: 'use GET on /admin/limited' } };
    return limited(params, policy, guard);
  }
  return null;
}

async function listEntries(guard: Guard, policy: RequestPolicy, kind: EntryKind): Promise<unknown> {
  await guard.refresh();
  const cfg = policy.snapshot.config;
  const fromConfig = (kind === 'block' ? cfg.block.ips : cfg.exempt.ips).map((id) => ({
    source: 'config',
    [key(id)]: id,
    reason: 'limits.yaml',
    expiresAt: null,
  }));
  const runtime = guard
    .entries()
    .filter((e) => e.kind === kind)
    .map((e) => ({ source: 'runtime', [key(e.id)]: e.id, reason: e.reason, createdAt: iso(e.createdAt), expiresAt: iso(e.expiresAt) }));
  const bans =
    kind === 'block'
      ? guard
          .entries()
          .filter((e) => e.kind === 'ban')
          .map((e) => ({ source: 'ban', ...banJson(e) }))
      : [];
  return { scope: guard.state.scope, entries: [...fromConfig, ...runtime, ...bans] };
}

async function addEntry(req: http.IncomingMessage, guard: Guard, kind: EntryKind): Promise<AdminAnswer> {
  const body = await readJson(req);
  if (typeof body === 'string') return { status: 400, body: { error: body } };
  const target = body.ip ?? body.cidr;
  if (typeof target !== 'string' || (body.ip !== undefined && body.cidr !== undefined)) {
    return { status: 400, body: { error: 'give one of "ip" or "cidr", e.g. {"ip": "203.0.113.7", "for": "1h", "reason": "credential stuffing"}' } };
  }
  const bad = checkIpOrCidr(target);
  if (bad !== null) return { status: 400, body: { error: bad } };
  const forMs = body.for === undefined ? DEFAULT_FOR_MS : parseDuration(body.for);
  if (forMs === undefined || forMs < 1000 || forMs > MAX_FOR_MS) {
    return {
      status: 400,
      body: { error: `"for" must be a duration from 1s to ${formatDuration(MAX_FOR_MS)} (e.g. "15m", "1h"), got ${JSON.stringify(body.for)}` },
    };
  }
  if (body.reason !== undefined && (typeof body.reason !== 'string' || body.reason.length > 500)) {
    return { status: 400, body: { error: '"reason" must be a string of at most 500 characters' } };
  }
  const now = Date.now();
  const entry: GuardEntry = { kind, id: target, reason: body.reason ?? '', createdAt: now, expiresAt: now + forMs };
  await guard.state.put(entry);
  await guard.refresh();
  return {
    status: 201,
    body: { source: 'runtime', [key(target)]: target, reason: entry.reason, createdAt: iso(now), expiresAt: iso(entry.expiresAt), scope: guard.state.scope },
  };
}

function limited(params: URLSearchParams, policy: RequestPolicy, guard: Guard): AdminAnswer {
  const rule = params.get('rule');
  const names = policy.snapshot.rules.map((r) => r.name);
  if (rule === null || rule === '') {
    return { status: 400, body: { error: 'missing rule: use /admin/limited?rule=NAME&top=20', rules: names, recentlyLimited: guard.top.rules() } };
  }
  if (!names.includes(rule)) return { status: 404, body: { error: `unknown rule ${JSON.stringify(rule)}`, rules: names } };
  const n = params.get('top') === null ? 20 : Number(params.get('top'));
  if (!Number.isInteger(n) || n < 1 || n > MAX_TOP) return { status: 400, body: { error: `top must be an integer from 1 to ${MAX_TOP}` } };
  return { status: 200, body: { rule, window: 'the last 5 to 10 minutes, this replica', top: guard.top.top(rule, n) } };
}

function banJson(e: GuardEntry): Record<string, unknown> {
  const slash = e.id.indexOf('/');
  return { ban: e.id.slice(0, slash), key: e.id.slice(slash + 1), reason: e.reason, createdAt: iso(e.createdAt), expiresAt: iso(e.expiresAt) };
}

function key(id: string): 'ip' | 'cidr' {
  return id.includes('/') ? 'cidr' : 'ip';
}

function iso(t: number | null): string | null {
  return t === null ? null : new Date(t).toISOString();
}

function decode(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

type AddBody = { ip?: unknown; cidr?: unknown; for?: unknown; reason?: unknown };

/** The request's JSON object body (bounded), or an error message. */
function readJson(req: http.IncomingMessage): Promise<AddBody | string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        resolve(`body over ${MAX_BODY} bytes`);
        req.destroy();
      } else chunks.push(c);
    });
    req.on('error', () => resolve('body not read'));
    req.on('end', () => {
      try {
        const v: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        resolve(v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as AddBody) : 'the body must be a JSON object');
      } catch {
        resolve('the body must be JSON, e.g. {"ip": "203.0.113.7", "for": "1h", "reason": "…"}');
      }
    });
  });
}

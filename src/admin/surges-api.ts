/**
 * @module The surge endpoints: `GET /admin/surges` (every surge, on or off, with its trigger's count),
 * `POST /admin/surges/<name>/start?for=30m&reason=…` and `POST /admin/surges/<name>/end?reason=…`. A
 * start or end goes to the store, so every replica switches within a second, and leaves an audit line.
 */
import { formatDuration, parseDuration } from '../config/fields/duration.js';
import type { Guard } from '../guard/guard.js';
import type { RequestPolicy } from '../pipeline/policy.js';
import { whoOf, type Actor, type Audit } from './audit.js';

type Answer = { status: number; body: unknown };

/** Longer than this belongs in limits.yaml (`for:`), where it is reviewed. */
const MAX_FOR_MS = 7 * 24 * 60 * 60_000;
const MAX_REASON = 500;

/** The answer for a surge path, or null when `path` is not one. */
export async function surgesEndpoint(
  method: string,
  path: string,
  params: URLSearchParams,
  ctx: { policy: RequestPolicy; guard: Guard; actor: Actor; audit: Audit },
): Promise<Answer | null> {
  if (path !== '/admin/surges' && !path.startsWith('/admin/surges/')) return null;
  const surges = ctx.guard.surges;
  if (path === '/admin/surges') {
    if (method !== 'GET') return { status: 405, body: { error: 'use GET on /admin/surges' } };
    return { status: 200, body: { scope: ctx.guard.state.scope, surges: surges === null ? [] : await surges.list() } };
  }
  const m = /^\/admin\/surges\/([^/]+)\/(start|end)$/.exec(path);
  if (m === null)
    return { status: 404, body: { error: 'use POST /admin/surges/<name>/start or /admin/surges/<name>/end' } };
  if (method !== 'POST') return { status: 405, body: { error: `use POST on ${path}` } };
  const name = m[1]!;
  const surge = ctx.policy.snapshot.config.surges.find((s) => s.name === name);
  if (surge === undefined || surges === null) {
    return {
      status: 404,
      body: {
        error: `unknown surge ${JSON.stringify(name)}`,
        surges: ctx.policy.snapshot.config.surges.map((s) => s.name),
      },
    };
  }
  const reason = params.get('reason') ?? '';
  if (reason.length > MAX_REASON)
    return { status: 400, body: { error: `"reason" must be at most ${MAX_REASON} characters` } };
  if (m[2] === 'end') {
    const ended = await surges.end(name);
    if (ended === null) return { status: 404, body: { error: `surge ${name} is not on` } };
    ctx.audit('surge.end', { surge: name, reason }, `surge ${name} ended${reason ? ` (${reason})` : ''}`);
    return { status: 200, body: { ended: name } };
  }
  const given = params.get('for');
  const forMs = given === null ? surge.for : parseDuration(given);
  if (forMs === undefined || forMs < 1000 || forMs > MAX_FOR_MS) {
    return {
      status: 400,
      body: {
        error: `"for" must be a duration from 1s to ${formatDuration(MAX_FOR_MS)} (e.g. 30m), got ${JSON.stringify(given)}`,
      },
    };
  }
  const entry = await surges.start(name, forMs, reason === '' ? 'started by an operator' : reason, whoOf(ctx.actor));
  const until = new Date(entry.expiresAt!).toISOString();
  ctx.audit(
    'surge.start',
    { surge: name, reason, expiresAt: until },
    `surge ${name} started until ${until}${reason ? ` (${reason})` : ''}`,
  );
  return { status: 200, body: { started: name, endsAt: until } };
}

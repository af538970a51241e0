/**
 * @module The attack-day admin endpoints: runtime blocks and exemptions (`/admin/blocks`,
 * `/admin/exemptions`), bans (`/admin/bans`) and triage (`/admin/limited`). Writes go to the store, so
 * every replica applies them within a second (with the memory store: this process only); each write
 * leaves an audit line (audit.ts) and each entry records who made it.
 */
import type http from 'node:http';
import type { Guard } from '../guard/guard.js';
import type { EntryKind } from '../guard/entry.js';
import type { Store } from '../limiter/types.js';
import type { RequestPolicy } from '../pipeline/policy.js';
import type { Actor, Audit } from './audit.js';
import { surgesEndpoint } from './surges-api.js';
import type { FleetSketches } from '../fleet/fleet.js';
import { banJson, type AdminAnswer, type GuardApiContext } from './guard-answer.js';
import { addEntry, listEntries, removeEntry } from './guard-entries.js';
import { liftBan } from './guard-bans.js';
import { limited } from './guard-limited.js';

export type { AdminAnswer } from './guard-answer.js';
export { DEFAULT_FOR_MS, MAX_FOR_MS } from './guard-entries.js';

const SECTIONS: Record<string, { kind: EntryKind; config: 'block' | 'exempt'; noun: string }> = {
  '/admin/blocks': { kind: 'block', config: 'block', noun: 'block' },
  '/admin/exemptions': { kind: 'exempt', config: 'exempt', noun: 'exemption' },
};

/** Who is writing, and where to: what the admin router adds for writes (readers such as the status page need none). */
export interface GuardWriteContext {
  /** The counter store: `?resetBuckets=true` resets a lifted IP's buckets there (absent: nothing is reset). */
  readonly store?: Store;
  readonly actor?: Actor;
  readonly audit?: Audit;
  /** The replicas sharing the store: `/admin/limited` answers for all of them (absent: this process). */
  readonly fleet?: FleetSketches | undefined;
}

const NOBODY: Actor = { address: 'unknown', tokenId: null, tokenName: null };

/** The answer for a guard path, or null when `path` is not one of them. */
export async function guardEndpoint(
  req: http.IncomingMessage,
  path: string,
  params: URLSearchParams,
  policy: RequestPolicy,
  guard: Guard,
  write: GuardWriteContext = {},
): Promise<AdminAnswer | null> {
  const ctx: GuardApiContext = {
    policy,
    guard,
    store: write.store,
    actor: write.actor ?? NOBODY,
    audit: write.audit ?? (() => {}),
    fleet: write.fleet,
  };
  const method = req.method ?? 'GET';
  for (const [base, s] of Object.entries(SECTIONS)) {
    if (path === base) {
      if (method === 'GET') return { status: 200, body: await listEntries(ctx, s.kind) };
      if (method === 'POST') return addEntry(req, ctx, s.kind);
      return { status: 405, body: { error: `use GET or POST on ${base}` } };
    }
    if (path.startsWith(base + '/')) {
      if (method !== 'DELETE') return { status: 405, body: { error: `use DELETE on ${base}/<ip-or-cidr>` } };
      return removeEntry(ctx, s, path.slice(base.length + 1), params);
    }
  }
  if (path === '/admin/bans') {
    if (method !== 'GET') return { status: 405, body: { error: 'use GET on /admin/bans' } };
    await ctx.guard.sync();
    return {
      status: 200,
      body: {
        scope: ctx.guard.state.scope,
        bans: ctx.guard
          .entries()
          .filter((e) => e.kind === 'ban')
          .map(banJson),
      },
    };
  }
  if (path.startsWith('/admin/bans/')) {
    if (method !== 'DELETE') return { status: 405, body: { error: 'use DELETE on /admin/bans/<ban>/<key>' } };
    return liftBan(ctx, path.slice('/admin/bans/'.length), params);
  }
  const surge = await surgesEndpoint(method, path, params, ctx);
  if (surge !== null) return surge;
  if (path === '/admin/limited') {
    if (method !== 'GET') return { status: 405, body: { error: 'use GET on /admin/limited' } };
    return limited(params, ctx);
  }
  return null;
}

/**
 * @module What the guard endpoints (guard-api.ts and the modules it routes to) share: the context they
 * work with, the answer's shape, and the small pieces of their answers — an entry's `ip` or `cidr`
 * field, times as ISO strings, a ban as listed, a removal's `?reason=` and `?resetBuckets=`.
 */
import type { Guard } from '../guard/guard.js';
import type { GuardEntry } from '../guard/entry.js';
import { ipBucketKey } from '../identity/index.js';
import type { Store } from '../limiter/types.js';
import type { RequestPolicy } from '../pipeline/policy.js';
import type { Actor, Audit } from './audit.js';
import { resetIpBuckets } from './reset-ip.js';
import type { FleetSketches } from '../fleet/fleet.js';

export type AdminAnswer = { status: number; body: unknown };

export const MAX_REASON = 500;

/** What a guard endpoint works with. */
export interface GuardApiContext {
  readonly policy: RequestPolicy;
  readonly guard: Guard;
  readonly store: Store | undefined;
  readonly actor: Actor;
  readonly audit: Audit;
  readonly fleet: FleetSketches | undefined;
}

export function wantsReset(params: URLSearchParams): boolean {
  const v = params.get('resetBuckets');
  return v === 'true' || v === '1';
}

/** An optional `?reason=` for a removal or lift, for the audit line; an answer when it is too long. */
export function liftReason(params: URLSearchParams): string | AdminAnswer {
  const why = params.get('reason') ?? '';
  return why.length > MAX_REASON
    ? { status: 400, body: { error: `"reason" must be at most ${MAX_REASON} characters` } }
    : why;
}

/** Resets the buckets of the client a lifted block or IP ban named; a CIDR or a non-IP key names no single client. */
export async function resetFor(
  ctx: GuardApiContext,
  ipOrCidr: string | null,
): Promise<{ buckets: number; note?: string }> {
  const ipv6Prefix = ctx.policy.snapshot.config.clients.ipv6Prefix;
  const ipKey =
    ipOrCidr === null
      ? null
      : (ipBucketKey(ipOrCidr, ipv6Prefix) ??
        (ipOrCidr.includes(':') && ipOrCidr.endsWith(`/${ipv6Prefix}`) ? ipOrCidr : null));
  if (ipKey === null) return { buckets: 0, note: 'not a single client IP: no bucket was reset' };
  if (ctx.store === undefined) return { buckets: 0, note: 'no store to reset buckets in' };
  return { buckets: await resetIpBuckets(ctx.policy, ctx.store, ipKey, ctx.guard.limitedComposites) };
}

export function banJson(e: GuardEntry): Record<string, unknown> {
  const slash = e.id.indexOf('/');
  return {
    ban: e.id.slice(0, slash),
    key: e.id.slice(slash + 1),
    reason: e.reason,
    createdAt: iso(e.createdAt),
    expiresAt: iso(e.expiresAt),
    who: e.who ?? null,
  };
}

export function key(id: string): 'ip' | 'cidr' {
  return id.includes('/') ? 'cidr' : 'ip';
}

export function iso(t: number | null): string | null {
  return t === null ? null : new Date(t).toISOString();
}

export function decode(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

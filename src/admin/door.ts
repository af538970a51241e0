/**
 * @module Who may use the admin API and the status page: the bearer token whenever one is set; with none
 * set, only on a loopback-only listener. One rule for every admin read and write.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

/** Security: an open buckets API on a reachable port lets anyone reset their own limits. */
export const NO_TOKEN_OFF_LOOPBACK =
  'the admin API is disabled: this listener is not loopback-only and no admin token is set (admin.token, RATEGATE_ADMIN_TOKEN or admin.tokenFile)';

export const BEARER_CHALLENGE = 'Bearer realm="rategate-admin"';

export interface DoorSettings {
  /** The admin token in force, or null. */
  readonly token: string | null;
  /** Whether the listener accepts connections from this host only. */
  readonly loopbackOnly: boolean;
}

export type DoorAnswer = { readonly status: 401 | 403; readonly error: string };

/**
 * Null when the request may pass, else the refusal. `basic` also takes the token as the password of
 * HTTP Basic credentials: for the status page's reads only, so a browser without JavaScript can sign in
 * with its own dialog. Never for writes: a browser sends cached Basic credentials by itself, a bearer
 * header only when a script of the page sets it, so no other site can make a write with them.
 */
export function doorRefusal(door: DoorSettings, authorization: string | undefined, basic = false): DoorAnswer | null {
  if (door.token === null) return door.loopbackOnly ? null : { status: 403, error: NO_TOKEN_OFF_LOOPBACK };
  const presented = bearerOf(authorization) ?? (basic ? basicPasswordOf(authorization) : null);
  if (presented !== null && tokenMatches(presented, door.token)) return null;
  return { status: 401, error: 'admin token required' };
}

function bearerOf(header: string | undefined): string | null {
  const m = /^Bearer\s+(.+)$/i.exec(header ?? '');
  return m ? m[1]! : null;
}

function basicPasswordOf(header: string | undefined): string | null {
  const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? '');
  if (!m) return null;
  const text = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = text.indexOf(':');
  return colon < 0 ? null : text.slice(colon + 1);
}

/** Constant-time comparison of digests, so response timing does not leak the token a byte at a time. */
function tokenMatches(presented: string, token: string): boolean {
  const a = createHash('sha256').update(presented).digest();
  const b = createHash('sha256').update(token).digest();
  return timingSafeEqual(a, b);
}

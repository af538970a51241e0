/**
 * @module Who may use the admin API and the status page: a token in force (admin.tokens, admin.token)
 * whenever one is set, with the write scope for a write; with none set, anyone, on a loopback-only
 * listener only. One rule for every admin read and write.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { AdminCredential } from './token.js';

/** Security: an open buckets API on a reachable port lets anyone reset their own limits. */
export const NO_TOKEN_OFF_LOOPBACK =
  'the admin API is disabled: this listener is not loopback-only and no admin token is set (admin.token, RATEGATE_ADMIN_TOKEN, admin.tokenFile or admin.tokens)';

export const BEARER_CHALLENGE = 'Bearer realm="rategate-admin"';

export interface DoorSettings {
  /** The tokens in force (see loadAdminCredentials); none: the door is open on loopback, shut elsewhere. */
  readonly credentials: readonly AdminCredential[];
  /** Whether the listener accepts connections from this host only. */
  readonly loopbackOnly: boolean;
}

export type DoorAnswer = { readonly status: 401 | 403; readonly error: string };

/** What the door says: pass, with the token that matched (null when none is set), or the refusal. */
export type DoorResult =
  { readonly pass: true; readonly credential: AdminCredential | null } | ({ readonly pass: false } & DoorAnswer);

export interface DoorAsk {
  /** A write needs the write scope. */
  readonly write: boolean;
  /**
   * Also take the token as the password of HTTP Basic credentials: for the status page's reads only, so
   * a browser without JavaScript can sign in with its own dialog. Never for writes: a browser sends
   * cached Basic credentials by itself, a bearer header only when a script of the page sets it.
   */
  readonly basic?: boolean;
}

/**
 * Security: "required" (no credentials sent) and "not accepted" (sent, matching no token) are told
 * apart so that an operator sees a wrong token for what it is; "not accepted" is one message whatever
 * was sent, so it says nothing of which tokens or names exist.
 */
export function doorCheck(door: DoorSettings, authorization: string | undefined, ask: DoorAsk): DoorResult {
  if (door.credentials.length === 0)
    return door.loopbackOnly
      ? { pass: true, credential: null }
      : { pass: false, status: 403, error: NO_TOKEN_OFF_LOOPBACK };
  if (authorization === undefined || authorization.trim() === '')
    return { pass: false, status: 401, error: 'admin token required' };
  const presented = bearerOf(authorization) ?? (ask.basic === true ? basicPasswordOf(authorization) : null);
  const match = presented === null ? null : matching(presented, door.credentials);
  if (match === null) return { pass: false, status: 401, error: 'admin token not accepted' };
  if (ask.write && !match.write) {
    const who = match.name === null ? 'this token' : `token ${match.name}`;
    return {
      pass: false,
      status: 403,
      error: `${who} has the read scope only: this write needs a token with the write scope (admin.tokens[].scopes)`,
    };
  }
  return { pass: true, credential: match };
}

function bearerOf(header: string): string | null {
  const m = /^Bearer\s+(.+)$/i.exec(header);
  return m ? m[1]! : null;
}

function basicPasswordOf(header: string): string | null {
  const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  if (!m) return null;
  const text = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = text.indexOf(':');
  return colon < 0 ? null : text.slice(colon + 1);
}

/**
 * The token `presented` is, or null. Constant time: digests of equal length compared with
 * timingSafeEqual, against every token in force without stopping at a match, so neither the answer's
 * timing nor its content tells how much of a token was right, or which one.
 */
function matching(presented: string, credentials: readonly AdminCredential[]): AdminCredential | null {
  const digest = createHash('sha256').update(presented).digest();
  let match: AdminCredential | null = null;
  for (const c of credentials) if (timingSafeEqual(digest, c.digest) && match === null) match = c;
  return match;
}

/**
 * @module Who made an admin write, and the audit line every write leaves: what, on which key, why, until
 * when, from which address, and a token id (the first 8 hex digits of the token's SHA-256: enough to
 * tell tokens apart across a rotation, never the token).
 */
import { createHash } from 'node:crypto';
import type http from 'node:http';
import type { StoreLog } from '../limiter/types.js';

export interface Actor {
  /** The admin client's address (the TCP peer: the admin listener trusts no forwarding header). */
  readonly address: string;
  /** The token id, or null when the API is open without a token (loopback-only listener). */
  readonly tokenId: string | null;
}

export function tokenId(token: string): string {
  return createHash('sha256').update(token).digest('hex').slice(0, 8);
}

export function actorOf(req: http.IncomingMessage, token: string | null): Actor {
  return { address: req.socket.remoteAddress ?? 'unknown', tokenId: token === null ? null : tokenId(token) };
}

/** What an entry records as its maker, e.g. `token 3f2a9c1b from 10.0.0.5`. */
export function whoOf(actor: Actor): string {
  return `${actor.tokenId === null ? 'no token' : `token ${actor.tokenId}`} from ${actor.address}`;
}

/** One admin write: `action` (e.g. `block.add`), its fields (key, reason, expiry …), the sentence for people. */
export type Audit = (action: string, fields: Readonly<Record<string, unknown>>, text: string) => void;

/**
 * The audit writer for one request. Lines are `warn`, as other changes to who is refused are (a ban
 * started), so that a quiet log level keeps them.
 */
export function auditFor(log: StoreLog | undefined, actor: Actor): Audit {
  return (action, fields, text) => {
    log?.warn({ audit: action, ...fields, from: actor.address, tokenId: actor.tokenId }, `admin: ${text} by ${whoOf(actor)}`);
  };
}

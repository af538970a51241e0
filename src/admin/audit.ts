/**
 * @module Who made an admin write, and the audit line every write leaves: what, on which key, why, until
 * when, from which address, the token's name (admin.tokens) and its id (the first 8 hex digits of the
 * token's SHA-256: enough to tell tokens apart across a rotation, never the token).
 */
import type http from 'node:http';
import type { StoreLog } from '../limiter/types.js';
import type { AdminCredential } from './token.js';

export interface Actor {
  /** The admin client's address (the TCP peer: the admin listener trusts no forwarding header). */
  readonly address: string;
  /** The token id, or null when the API is open without a token (loopback-only listener). */
  readonly tokenId: string | null;
  /** The token's holder from admin.tokens, or null (the unnamed admin.token, or no token). */
  readonly tokenName: string | null;
}

export function actorOf(req: http.IncomingMessage, credential: AdminCredential | null): Actor {
  return {
    address: req.socket.remoteAddress ?? 'unknown',
    tokenId: credential?.id ?? null,
    tokenName: credential?.name ?? null,
  };
}

/** What an entry records as its maker, e.g. `token alice from 10.0.0.5`, or `token 3f2a9c1b from 10.0.0.5` for the unnamed one. */
export function whoOf(actor: Actor): string {
  const token =
    actor.tokenName !== null
      ? `token ${actor.tokenName}`
      : actor.tokenId !== null
        ? `token ${actor.tokenId}`
        : 'no token';
  return `${token} from ${actor.address}`;
}

/** One admin write: `action` (e.g. `block.add`), its fields (key, reason, expiry …), the sentence for people. */
export type Audit = (action: string, fields: Readonly<Record<string, unknown>>, text: string) => void;

/**
 * The audit writer for one request. Lines are `warn`, as other changes to who is refused are (a ban
 * started), so that a quiet log level keeps them.
 */
export function auditFor(log: StoreLog | undefined, actor: Actor): Audit {
  return (action, fields, text) => {
    const named = actor.tokenName === null ? {} : { token: actor.tokenName };
    log?.warn(
      { audit: action, ...fields, from: actor.address, tokenId: actor.tokenId, ...named },
      `admin: ${text} by ${whoOf(actor)}`,
    );
  };
}

/**
 * @module The token digest of a connection's last request, kept with the connection: a client sends the
 * same token on every request of a keep-alive connection, and its SHA-256 (~260 ns) was the largest
 * single cost of the account look-up. Security: the raw token is kept only while the connection that
 * sent it is open (it arrived on it), never beyond, and a digest is reused only for the very same
 * string on the same connection, so no client's request is ever answered from another connection's
 * entry (no cross-client hit, nothing to time). Memory: one entry per open connection, ~250 B for a
 * Doorkeeper token; a token longer than MEMO_MAX is hashed each time and not kept.
 */
import { tokenDigest } from './account.js';

/** Longer tokens (a large JWT) are not kept: the memo's memory per connection stays small. */
export const MEMO_MAX = 512;

interface Memo {
  token: string;
  digest: string;
}

const byConnection = new WeakMap<object, Memo>();

/** `tokenDigest(token)`, from the connection's last request when it carried the same token. */
export function connectionTokenDigest(connection: object | null | undefined, token: string): string {
  if (connection == null || token.length > MEMO_MAX) return tokenDigest(token);
  const memo = byConnection.get(connection);
  if (memo !== undefined && memo.token === token) return memo.digest;
  const digest = tokenDigest(token);
  if (memo === undefined) byConnection.set(connection, { token, digest });
  else {
    memo.token = token;
    memo.digest = digest;
  }
  return digest;
}

/**
 * @module Account keys: the one place that spells their forms, `t:<token sha256 hex>`, `h:<header
 * value>` and `a:<introspected account id>`. The resolver, `exempt.accounts` and the admin API all build
 * keys here, so an operator's id and a request's account always meet on the same key.
 */

/** A header value or account id longer than this is not an identifier, and must not become a key. */
const MAX_ID_LEN = 256;

// Keys end up inside store keys such as `rule:{acct:…}`; a `{`, `}`, space or control character from
// a header or an upstream id would change the Redis Cluster hash tag or corrupt logs, so anything
// outside this set is percent-encoded (injective, so distinct ids stay distinct).
const SAFE_ID = /^[A-Za-z0-9._~@+=-]+$/;
const DIGEST = /^[0-9a-f]{64}$/i;

function encodeId(value: string): string | null {
  if (value.length === 0 || value.length > MAX_ID_LEN) return null;
  if (SAFE_ID.test(value)) return value;
  try {
    return encodeURIComponent(value);
  } catch {
    return null; // lone surrogate: not an identifier
  }
}

/** The key of a token by its SHA-256 digest (as `tokenDigest` makes it: lower-case hex). */
export function accountKeyFromDigest(digest: string): string {
  return `t:${digest}`;
}

/** The key of a digest an operator typed (any case), or null when it is not a SHA-256 hex digest. */
export function accountKeyFromDigestText(text: string): string | null {
  return DIGEST.test(text) ? accountKeyFromDigest(text.toLowerCase()) : null;
}

/** The key of an account header value, or null if unusable. */
export function accountKeyFromHeader(value: string): string | null {
  const id = encodeId(value);
  return id === null ? null : `h:${id}`;
}

/** The key of an introspected account id, or null if unusable. */
export function accountKeyFromId(id: string): string | null {
  const enc = encodeId(id);
  return enc === null ? null : `a:${enc}`;
}

/**
 * The key of the account an operator names (the admin API's `key`) under `clients.account.from`: the
 * account id (introspect), the header value (header), or the token's SHA-256 digest (token).
 */
export function accountKeyNamedBy(from: 'token' | 'header' | 'introspect', id: string): string | null {
  return from === 'introspect'
    ? accountKeyFromId(id)
    : from === 'header'
      ? accountKeyFromHeader(id)
      : accountKeyFromDigestText(id);
}

/** Every key an operator's id may stand for, whatever the mode (`exempt.accounts` does not say which). */
export function accountKeysNamedBy(id: string): string[] {
  const keys: string[] = [];
  for (const k of [accountKeyFromId(id), accountKeyFromHeader(id), accountKeyFromDigestText(id)])
    if (k !== null) keys.push(k);
  return keys;
}

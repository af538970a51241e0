/**
 * @module A claim of a JWT bearer token, read without verifying it (`per: jwt:CLAIM`): the payload of a
 * `header.payload.signature` token, base64url-decoded and JSON-parsed, within fixed bounds. The gateway
 * holds no key, so a claim is what the client says it is unless the upstream verifies the token: a key
 * a client chooses, like a header's value (docs/limit-table.md says so).
 */

/** Longer than any token worth decoding (the account resolver introspects at most 4096 characters). */
export const MAX_JWT_LENGTH = 8192;
/** A claim value longer than this is no identifier: no key (the rule is skipped, as without the claim). */
export const MAX_CLAIM_LENGTH = 256;

/** A JWT segment: base64url without padding (RFC 7515 §2). */
const SEGMENT = /^[A-Za-z0-9_-]*$/;

/** The parsed payload, or null when `token` is not a JWT within the bounds (then no claim is read). */
export type JwtPayload = Readonly<Record<string, unknown>> | null;

/**
 * Decodes the payload of `token`: three segments, the first two non-empty base64url, the payload a
 * JSON object. The signature is not checked (nor required to be non-empty): nothing here trusts it.
 */
export function jwtPayload(token: string): JwtPayload {
  if (token.length > MAX_JWT_LENGTH) return null;
  const first = token.indexOf('.');
  const second = first < 0 ? -1 : token.indexOf('.', first + 1);
  if (first <= 0 || second <= first + 1 || token.indexOf('.', second + 1) !== -1) return null;
  const payload = token.slice(first + 1, second);
  if (!SEGMENT.test(token.slice(0, first)) || !SEGMENT.test(payload) || !SEGMENT.test(token.slice(second + 1)))
    return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)
    ? (parsed as Record<string, unknown>)
    : null;
}

/** The last token decoded and its payload: every `jwt:` rule of a request (and a client's next request) reads one token. */
let lastToken: string | null = null;
let lastPayload: JwtPayload = null;

/** A claim of the request's token (keys/kinds.ts KeyFacts), the payload decoded once per token. */
export function tokenClaim(facts: { rawToken(): string | null }, claim: string): string | undefined {
  const token = facts.rawToken();
  if (token === null) return undefined;
  if (token !== lastToken) {
    lastPayload = jwtPayload(token);
    lastToken = token;
  }
  return claimValue(lastPayload, claim);
}

/**
 * A claim as key text: a non-blank string (as sent) or a finite number (its decimal text, so `42` and
 * `"42"` are one key); anything else (absent, boolean, object, array, too long) is no key.
 */
export function claimValue(payload: JwtPayload, claim: string): string | undefined {
  if (payload === null || !Object.prototype.hasOwnProperty.call(payload, claim)) return undefined;
  const v = payload[claim];
  const text = typeof v === 'string' ? v : typeof v === 'number' && Number.isFinite(v) ? String(v) : undefined;
  if (text === undefined || text.length > MAX_CLAIM_LENGTH || text.trim() === '') return undefined;
  return text;
}

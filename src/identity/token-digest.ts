/** @module A bearer token's digest, and which tokens are worth asking the upstream about. */
import { hash } from 'node:crypto';

/** Where the token's SHA-256 and format check were already done (the request's view holds them): read, not done again. */
export interface TokenDigestOf {
  tokenDigest(): string | null;
  /** isIntrospectable of the request's token (false without one). */
  tokenIntrospectable?(): boolean;
}

/** The digest of `token`, from the request's view when it has one. */
export function digestOf(token: string, from: TokenDigestOf | undefined): string {
  return from?.tokenDigest() ?? tokenDigest(token);
}

/** isIntrospectable(token), from the request's view when it has one (`token` is then the view's). */
export function introspectableOf(token: string, from: TokenDigestOf | undefined): boolean {
  return from?.tokenIntrospectable !== undefined ? from.tokenIntrospectable() : isIntrospectable(token);
}

/**
 * Doorkeeper's tokens (`SecureRandom.urlsafe_base64`, hex, or a JWT) are RFC 6750 `b64token`s of sane
 * length. Security: only such a token is introspected. Anything else cannot be a token the upstream
 * issued, so it is "no account" (counted per IP, as unauthenticated), never keyed as an account; and
 * it never reaches an `Authorization` header the HTTP client could refuse (a refused header leaked a
 * pool slot, and 128 of them wedged the gateway: issue 18).
 */
const DOORKEEPER_TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
/** Longer than any token Doorkeeper issues (43 characters by default; a signed JWT, a few hundred). */
export const MAX_INTROSPECTED_TOKEN = 4096;

export function isIntrospectable(token: string): boolean {
  return token.length <= MAX_INTROSPECTED_TOKEN && DOORKEEPER_TOKEN.test(token);
}

/** SHA-256 of a token, hex. Security: the only form of a token that is kept, keyed on, or shown. */
export function tokenDigest(token: string): string {
  return hash('sha256', token, 'hex');
}

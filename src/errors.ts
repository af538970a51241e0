/**
 * @module One base for the errors rategate throws, each with a stable `code` (as undici's errors
 * module): callers and tests tell failures apart by code or class, never by message. A leaf at the
 * bottom (like rails/rack-params.ts): every folder may import it, it imports nothing. What the gateway
 * ANSWERS is another catalogue (http/errors.ts).
 */

/** Every code a RategateError may carry; a code, once published, never changes its meaning. */
export const ERROR_CODES = [
  'CONFIG_INVALID',
  'WORKERS_REFUSED',
  'PARAM_INVALID',
  'PARAM_BEYOND_PEEK',
  'BODY_TOO_LARGE',
  'BODY_TOO_SLOW',
  'MASTODON_HTTP',
  'STORE_ERROR',
  'STORE_TIMEOUT',
  'STORE_UNAVAILABLE',
  'STORE_URL_INVALID',
] as const;
export type RategateErrorCode = (typeof ERROR_CODES)[number];

export abstract class RategateError extends Error {
  abstract readonly code: RategateErrorCode;

  constructor(message?: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Whether `err` (or what it wraps) is a rategate error with this code. */
export function hasCode(err: unknown, code: RategateErrorCode): boolean {
  for (let e = err; e instanceof Error; e = e.cause) if ((e as { code?: unknown }).code === code) return true;
  return false;
}

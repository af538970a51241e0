/**
 * @module One base for the errors rategate throws, each with a stable `code` (as undici's errors
 * module): callers and tests tell failures apart by code or class, never by message. A leaf at the
 * bottom (like rails/rack-params.ts): every folder may import it, it imports nothing. What the gateway
 * ANSWERS is another catalogue (http/errors.ts).
 */

/**
 * Every code a RategateError may carry, with the class that carries it and when it is thrown (docs/errors.md
 * is generated from it); a code, once published, never changes its meaning.
 */
export const THROWN_ERRORS = {
  CONFIG_INVALID: {
    thrower: 'ConfigError (src/config/errors.ts)',
    when: 'a limit table or an override is invalid; holds every problem found, each with its place',
  },
  WORKERS_REFUSED: {
    thrower: 'WorkersRefused (src/app/workers.ts)',
    when: '`serve --workers N` with a store the workers cannot share',
  },
  PARAM_INVALID: {
    thrower: 'ParamError (src/rails/rack-params.ts)',
    when: 'a parameter set Rails would refuse (a type conflict, too deep, bad JSON: 400; too many: 413)',
  },
  PARAM_BEYOND_PEEK: {
    thrower: 'ParamBeyondPeekError (src/rails/replay-body.ts)',
    when: 'a counted multipart field came after the first file part, once the body was streaming',
  },
  BODY_TOO_LARGE: {
    thrower: 'BodyTooLargeError (src/proxy/upstream-body.ts)',
    when: "a request body grew past its route's body limit while it was forwarded",
  },
  BODY_TOO_SLOW: {
    thrower: 'BodyTooSlowError (src/http/body-rate.ts)',
    when: 'a request body arrived slower than server.minBodyRate for longer than its grace',
  },
  MASTODON_HTTP: {
    thrower: 'HttpError (src/mastodon/reply.ts)',
    when: 'the built-in upstream answers an error status',
  },
  STORE_ERROR: {
    thrower: 'StoreError (src/limiter/errors.ts)',
    when: 'a store call produced no decision; the fault policy turns it into one',
  },
  STORE_TIMEOUT: {
    thrower: 'StoreTimeoutError (src/limiter/errors.ts)',
    when: 'the store did not answer within store.timeout',
  },
  STORE_UNAVAILABLE: {
    thrower: 'StoreUnavailableError (src/limiter/types.ts)',
    when: 'no decision can be made (onError: deny, the store down): the gateway answers 503',
  },
  STORE_URL_INVALID: {
    thrower: 'StoreUrlError (src/config/store-url.ts)',
    when: 'a store.url that names no store rategate can connect to',
  },
} as const satisfies Record<string, { thrower: string; when: string }>;

export const ERROR_CODES = Object.keys(THROWN_ERRORS) as (keyof typeof THROWN_ERRORS)[];
export type RategateErrorCode = keyof typeof THROWN_ERRORS;

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

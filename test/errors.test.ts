/** @module The one base of thrown errors (src/errors.ts): each error class carries its stable code and its own name. */
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, hasCode, RategateError } from '../src/errors.js';
import { ConfigError } from '../src/config/errors.js';
import { WorkersRefused } from '../src/app/workers.js';
import { ParamError } from '../src/rails/rack-params.js';
import { ParamBeyondPeekError } from '../src/rails/replay-body.js';
import { BodyTooLargeError } from '../src/proxy/upstream-body.js';
import { BodyTooSlowError } from '../src/http/body-rate.js';
import { HttpError } from '../src/mastodon/reply.js';
import { StoreError, StoreTimeoutError } from '../src/limiter/errors.js';
import { StoreUnavailableError } from '../src/limiter/types.js';
import { StoreUrlError } from '../src/config/store-url.js';

describe('thrown errors', () => {
  const made: [RategateError, string, string][] = [
    [new ConfigError('t.yaml', ['limits: required']), 'CONFIG_INVALID', 'ConfigError'],
    [new WorkersRefused('needs a shared store'), 'WORKERS_REFUSED', 'WorkersRefused'],
    [new ParamError(400, 'bad key'), 'PARAM_INVALID', 'ParamError'],
    [new ParamBeyondPeekError('after the file'), 'PARAM_BEYOND_PEEK', 'ParamBeyondPeekError'],
    [new BodyTooLargeError('too large'), 'BODY_TOO_LARGE', 'BodyTooLargeError'],
    [new BodyTooSlowError('too slow'), 'BODY_TOO_SLOW', 'BodyTooSlowError'],
    [new HttpError(404, 'Record not found'), 'MASTODON_HTTP', 'HttpError'],
    [new StoreError('connection', 'store consume failed'), 'STORE_ERROR', 'StoreError'],
    [new StoreTimeoutError(50, 'consume'), 'STORE_TIMEOUT', 'StoreTimeoutError'],
    [new StoreUnavailableError('no decision'), 'STORE_UNAVAILABLE', 'StoreUnavailableError'],
    [new StoreUrlError('redis://', 'no host'), 'STORE_URL_INVALID', 'StoreUrlError'],
  ];

  it('share one base, each with a listed stable code and its class name', () => {
    for (const [err, code, name] of made) {
      expect(err).toBeInstanceOf(RategateError);
      expect(err).toBeInstanceOf(Error);
      expect(err.code).toBe(code);
      expect(err.name).toBe(name);
      expect(ERROR_CODES).toContain(err.code);
    }
    expect(new Set(made.map(([e]) => e.code)).size).toBe(made.length);
  });

  it('are found by code through the causes that wrap them', () => {
    const inner = new BodyTooLargeError('too large');
    const outer = new Error('request body failed', { cause: new Error('stream failed', { cause: inner }) });
    expect(hasCode(outer, 'BODY_TOO_LARGE')).toBe(true);
    expect(hasCode(outer, 'PARAM_BEYOND_PEEK')).toBe(false);
    expect(hasCode('BODY_TOO_LARGE', 'BODY_TOO_LARGE')).toBe(false);
    // A store timeout is a store error too: its class says so, its code says which.
    const timeout = new StoreTimeoutError(50, 'consume');
    expect(timeout).toBeInstanceOf(StoreError);
    expect(hasCode(new Error('x', { cause: timeout }), 'STORE_TIMEOUT')).toBe(true);
  });
});

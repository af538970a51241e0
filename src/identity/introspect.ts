/** @module Asks the upstream who owns a bearer token (Mastodon `GET /api/v1/accounts/verify_credentials`). */
import type { Dispatcher } from 'undici';
import type { Introspect, IntrospectResult } from './account.js';

export interface HttpIntrospectorOptions {
  /** A Pool (or Agent) to the upstream; shared with the proxy so introspection reuses its connections. */
  readonly dispatcher: Dispatcher;
  /** e.g. `http://127.0.0.1:3000`. */
  readonly origin: string;
  /** e.g. `/api/v1/accounts/verify_credentials`. */
  readonly path: string;
  /** Bound on the whole exchange (connect, headers and body). */
  readonly timeoutMs: number;
  /** A larger 200 body is treated as an error (default 256 KiB; an Account is a few KiB). */
  readonly maxBodyBytes?: number;
}

const ANONYMOUS: IntrospectResult = Object.freeze({ kind: 'anonymous' });
const TOKEN: IntrospectResult = Object.freeze({ kind: 'token' });
const ERROR: IntrospectResult = Object.freeze({ kind: 'error' });
/** Bytes of a non-200 body read to keep the connection reusable before giving up on it. */
const DRAIN_LIMIT = 64 * 1024;

function ignore(): void {}

/**
 * 200 with a JSON `id` (string or integer) → account; 401 (a bad token) and 422 (Mastodon's
 * `require_user!`: an app-only token with no user, which Mastodon counts per IP) → anonymous; 403 →
 * token (Doorkeeper's insufficient scope, e.g. a write-only token: a real token that can still write, so
 * it must be counted, by its digest); anything else, a network error or the timeout → error. Never rejects. The token goes only into the request's Authorization header: it is
 * not logged and not part of any error this function lets out.
 */
export function createHttpIntrospector(opts: HttpIntrospectorOptions): Introspect {
  const { dispatcher, origin, path, timeoutMs } = opts;
  const maxBodyBytes = opts.maxBodyBytes ?? 256 * 1024;

  return async function introspect(token: string): Promise<IntrospectResult> {
    const signal = AbortSignal.timeout(timeoutMs);
    let response: Dispatcher.ResponseData;
    try {
      response = await dispatcher.request({
        origin,
        path,
        method: 'GET',
        headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
        signal,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
    } catch {
      return ERROR;
    }
    const { statusCode, body } = response;
    if (statusCode !== 200) {
      // Drain in the background (the signal still bounds it) so a keep-alive connection survives;
      // the answer does not depend on the body.
      body.dump({ limit: DRAIN_LIMIT, signal }).catch(ignore);
      if (statusCode === 403) return TOKEN;
      return statusCode === 401 || statusCode === 422 ? ANONYMOUS : ERROR;
    }
    try {
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of body) {
        const buf = chunk as Buffer;
        size += buf.length;
        if (size > maxBodyBytes) {
          body.destroy();
          return ERROR;
        }
        chunks.push(buf);
      }
      const parsed: unknown = JSON.parse(Buffer.concat(chunks, size).toString('utf8'));
      return accountOf(parsed);
    } catch {
      body.destroy();
      return ERROR;
    }
  };
}

/** Mastodon ids are strings; an integer id (other servers) is accepted in its decimal form. */
function accountOf(value: unknown): IntrospectResult {
  if (typeof value !== 'object' || value === null) return ERROR;
  const id = (value as { id?: unknown }).id;
  if (typeof id === 'string' && id.length > 0) return { kind: 'account', id };
  if (typeof id === 'number' && Number.isSafeInteger(id)) return { kind: 'account', id: String(id) };
  return ERROR;
}

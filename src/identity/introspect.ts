/** @module Asks the upstream who owns a bearer token (Mastodon `GET /api/v1/accounts/verify_credentials`). */
import { Pool, type Dispatcher } from 'undici';
import {
  introspectionResult,
  isIntrospectable,
  type Introspect,
  type IntrospectionResult,
  type IntrospectResult,
} from './account.js';
import { factsOf } from './account-facts.js';

export interface HttpIntrospectorOptions {
  /** Introspection's own pool to the upstream (createIntrospectionPool), never the proxy's. */
  readonly dispatcher: Dispatcher;
  /** e.g. `http://127.0.0.1:3000`. */
  readonly origin: string;
  /** e.g. `/api/v1/accounts/verify_credentials`. */
  readonly path: string;
  /** Deadline of the whole call, waiting for a free connection included. */
  readonly timeoutMs: number;
  /** A larger 200 body is treated as an error (default 256 KiB; an Account is a few KiB). */
  readonly maxBodyBytes?: number;
}

/**
 * Security: introspection has its own bounded pool. Shared with the proxy, anything that held its
 * connections (slow introspection answers, a leaked slot) held every proxied request too.
 */
export function createIntrospectionPool(
  origin: string,
  opts: { connections: number; timeoutMs: number; connectTimeoutMs: number },
): Pool {
  return new Pool(origin, {
    connections: opts.connections,
    pipelining: 1,
    connect: { timeout: Math.min(opts.connectTimeoutMs, opts.timeoutMs) },
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.timeoutMs,
    keepAliveTimeout: 4_000,
  });
}

const ANONYMOUS: IntrospectResult = Object.freeze({ kind: 'anonymous' });
const TOKEN: IntrospectResult = Object.freeze({ kind: 'token' });
const ERROR: IntrospectResult = Object.freeze({ kind: 'error' });
/** Bytes of a non-200 body read to keep the connection reusable before giving up on it. */
const DRAIN_LIMIT = 64 * 1024;

function ignore(): void {}

/**
 * 200 with a JSON `id` (string or integer) → account; 403 → token (Doorkeeper's insufficient scope,
 * e.g. a write-only token: a real token that can still write, so it must be counted, by its digest);
 * any other 4xx → anonymous (401 a bad token; 422 Mastodon's `require_user!`, an app-only token with no
 * user, which Mastodon counts per IP; 431 or 400 a junk token too large for the upstream's head);
 * anything else, a network error or the deadline → error. A token outside Doorkeeper's character set is
 * anonymous without a call. Never rejects. The token goes only into the request's Authorization header:
 * it is not logged and not part of any error this function lets out.
 */
export function createHttpIntrospector(opts: HttpIntrospectorOptions): Introspect {
  const { dispatcher, origin, path, timeoutMs } = opts;
  const maxBodyBytes = opts.maxBodyBytes ?? 256 * 1024;

  async function ask(token: string, signal: AbortSignal): Promise<IntrospectResult> {
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
      return statusCode >= 400 && statusCode < 500 ? ANONYMOUS : ERROR;
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
  }

  return function introspect(token: string): Promise<IntrospectResult> {
    // Security: the one check that keeps a header undici would refuse out of the pool (by construction,
    // whoever calls this).
    if (!isIntrospectable(token)) return Promise.resolve(ANONYMOUS);
    const signal = AbortSignal.timeout(timeoutMs);
    return new Promise<IntrospectResult>((resolve) => {
      // The deadline is ours, not only undici's: a call still queued for a connection when it passes is
      // answered (error) at once, and the abort frees its queue entry when undici reaches it.
      signal.addEventListener('abort', () => resolve(ERROR), { once: true });
      ask(token, signal).then(resolve, () => resolve(ERROR));
    });
  };
}

/** `introspect`, telling `count` the result of each call it makes (the metric; it adds no rejection: an Introspect never rejects). */
export function countedIntrospect(introspect: Introspect, count: (result: IntrospectionResult) => void): Introspect {
  return (token) =>
    introspect(token).then((result) => {
      count(introspectionResult(result));
      return result;
    });
}

/** Mastodon ids are strings; an integer id (other servers) is accepted in its decimal form. */
function accountOf(value: unknown): IntrospectResult {
  if (typeof value !== 'object' || value === null) return ERROR;
  const entity = value as Record<string, unknown>;
  const id = entity.id;
  if (typeof id === 'string' && id.length > 0) return { kind: 'account', id, facts: factsOf(entity) };
  if (typeof id === 'number' && Number.isSafeInteger(id))
    return { kind: 'account', id: String(id), facts: factsOf(entity) };
  return ERROR;
}

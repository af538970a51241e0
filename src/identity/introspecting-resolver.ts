/** @module The introspect-mode account resolver: cached, single-flight upstream lookups of a token's owner. */
import { accountKeyFromDigest, accountKeyFromId } from './account-key.js';
import { AnswerCache, type CacheEntry } from './answer-cache.js';
import { BoundedMap } from './bounded-map.js';
import type { AccountFacts } from './account-facts.js';
import type { AccountKey, AccountOptions, AccountResolver, Introspect, IntrospectResult } from './account-types.js';
import { digestOf, introspectableOf, type TokenDigestOf } from './token-digest.js';

/** How long an invalid answer is believed by default (`clients.account.introspection.invalidTtl`). */
export const DEFAULT_INVALID_TTL_MS = 60_000;

const ERROR: IntrospectResult = Object.freeze({ kind: 'error' });

export function createIntrospectingResolver(opts: Extract<AccountOptions, { from: 'introspect' }>): AccountResolver {
  const { introspect } = opts;
  const { cacheTtlMs, anonymousTtlMs } = ttlsOf(opts);
  const now = opts.now ?? Date.now;
  const cache = new AnswerCache(opts.maxEntries ?? 100_000, now);
  // Single flight: concurrent misses for one token share one upstream call. Bounded by the number of
  // calls in progress, which the upstream pool's timeout bounds in time.
  const inflight = new Map<string, Promise<AccountKey>>();
  // Per account, not per token: refreshed whenever one of its tokens is introspected again, so as fresh as the account.
  const factsByAccount = new BoundedMap<string, AccountFacts>(opts.maxEntries ?? 100_000);

  async function lookUp(token: string, digest: string): Promise<AccountKey> {
    const call = callUpstream(introspect, token);
    let result: IntrospectResult;
    try {
      result = await call;
    } catch {
      result = ERROR;
    } finally {
      inflight.delete(digest);
    }
    const entry = cacheEntryFor(result, digest, now(), cacheTtlMs, anonymousTtlMs);
    if (entry !== null) {
      if (entry.key !== null && result.kind === 'account' && result.facts !== undefined)
        factsByAccount.set(entry.key, result.facts);
      cache.set(digest, entry);
      return entry.key;
    }
    // Not cached, so the next request retries. The digest key keeps a client on one account bucket
    // while the upstream is flaky (a failure must not be a way to dodge the account limit) without
    // blocking it (the upstream may be fine for the real request).
    return accountKeyFromDigest(digest);
  }

  function introspects(token: string | null, from?: TokenDigestOf): boolean {
    if (token === null || !introspectableOf(token, from)) return false;
    const digest = digestOf(token, from);
    return !inflight.has(digest) && cache.get(digest) === undefined;
  }

  function knownToken(
    token: string | null,
    _header?: string,
    _trusted?: boolean,
    from?: TokenDigestOf,
  ): AccountKey | undefined {
    if (token === null || !introspectableOf(token, from)) return null;
    return cache.get(digestOf(token, from))?.key;
  }

  function resolveToken(
    token: string | null,
    _header?: string,
    _trusted?: boolean,
    from?: TokenDigestOf,
  ): AccountKey | Promise<AccountKey> {
    if (token === null || !introspectableOf(token, from)) return null;
    const digest = digestOf(token, from);
    const hit = cache.get(digest);
    if (hit !== undefined) return hit.key;
    let pending = inflight.get(digest);
    if (pending === undefined) {
      pending = lookUp(token, digest);
      inflight.set(digest, pending);
    }
    return pending;
  }

  const facts = (key: string): AccountFacts | undefined => factsByAccount.get(key);
  return { from: 'introspect', header: undefined, known: knownToken, resolve: resolveToken, facts, introspects };
}

/** The upstream's pending answer for a token; a synchronous throw is an `error` answer. */
function callUpstream(introspect: Introspect, token: string): Promise<IntrospectResult> {
  try {
    return introspect(token);
  } catch {
    // A synchronous throw must still settle after `resolve` has registered the flight,
    // or the `finally` would run first and leave a settled promise in `inflight` for good.
    return Promise.resolve(ERROR);
  }
}

/** How long an account answer and an invalid one are believed (an invalid one never longer than an account). */
function ttlsOf(opts: { readonly cacheTtlMs: number; readonly invalidTtlMs?: number }): {
  cacheTtlMs: number;
  anonymousTtlMs: number;
} {
  const { cacheTtlMs } = opts;
  const invalidTtlMs = opts.invalidTtlMs ?? DEFAULT_INVALID_TTL_MS;
  if (!(cacheTtlMs >= 0)) throw new Error(`cacheTtlMs must be >= 0, got ${cacheTtlMs}`);
  if (!(invalidTtlMs >= 0)) throw new Error(`invalidTtlMs must be >= 0, got ${invalidTtlMs}`);
  return { cacheTtlMs, anonymousTtlMs: Math.min(cacheTtlMs, invalidTtlMs) };
}

/** What an introspection answer caches; null for an error or an id we cannot key on (as unreliable as an error). */
function cacheEntryFor(
  result: IntrospectResult,
  digest: string,
  now: number,
  cacheTtlMs: number,
  anonymousTtlMs: number,
): CacheEntry | null {
  switch (result.kind) {
    case 'account': {
      const key = accountKeyFromId(result.id);
      return key === null ? null : { key, expiresAt: now + cacheTtlMs };
    }
    case 'token':
      return { key: accountKeyFromDigest(digest), expiresAt: now + cacheTtlMs };
    case 'anonymous':
      return { key: null, expiresAt: now + anonymousTtlMs };
    case 'error':
      return null;
  }
}

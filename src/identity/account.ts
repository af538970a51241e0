/** @module The account a request is counted against: token digest, trusted header, or introspection. */
import { hash } from 'node:crypto';
import { accountKeyFromDigest, accountKeyFromHeader, accountKeyFromId } from './account-key.js';
import { AnswerCache, type CacheEntry } from './answer-cache.js';
import { BoundedMap } from './bounded-map.js';
import type { AccountFacts } from './account-facts.js';

export { accountKeyFromHeader, accountKeyFromId } from './account-key.js';

/** What the upstream says about a token. */
export type IntrospectResult =
  /** `facts`: what the answer tells of the account (`when.account`); absent: nothing. */
  | { readonly kind: 'account'; readonly id: string; readonly facts?: AccountFacts | undefined }
  /**
   * The token is invalid (401, or any other 4xx but 403: a token too large for the upstream's head is
   * 431 or 400) or has no owner (422, an app-only token): counted per IP only, as Mastodon does.
   */
  | { readonly kind: 'anonymous' }
  /**
   * The upstream knows the token but will not say whose it is (403: e.g. a write-only token, which can
   * still upload and delete). Security: keyed by the token's digest, never "no account", or such a token
   * would escape every per-account rule.
   */
  | { readonly kind: 'token' }
  /** The upstream could not answer (5xx, network, timeout, bad body). */
  | { readonly kind: 'error' };

/** Asks the upstream who owns a token. Must not throw; a rejection is treated as `error` anyway. */
export type Introspect = (token: string) => Promise<IntrospectResult>;

export type AccountOptions =
  | { readonly from: 'token' }
  | { readonly from: 'header'; readonly header: string }
  | {
      readonly from: 'introspect';
      readonly introspect: Introspect;
      /** How long an account answer is believed. */
      readonly cacheTtlMs: number;
      /**
       * How long an invalid answer (`anonymous`) is believed, at most `cacheTtlMs` (default 60 s): a
       * repeated junk token then costs no upstream call and no introspection budget.
       */
      readonly invalidTtlMs?: number;
      /**
       * Cap on remembered tokens (default 100 000), for valid and for invalid answers apart: a flood of
       * random tokens evicts older invalid ones, never grows, and never pushes out a valid token's entry.
       */
      readonly maxEntries?: number;
      /** Injected clock (epoch ms) for tests; default Date.now. */
      readonly now?: () => number;
    };

/**
 * An account key (`t:<sha256 hex>`, `h:<header value>`, `a:<account id>`) or null when the request has
 * no account, so `per: account` rules are skipped for it.
 */
export type AccountKey = string | null;

export interface AccountResolver {
  readonly from: AccountOptions['from'];
  /** Lower-case name of the header whose value `resolve` wants ('header' mode); undefined otherwise. */
  readonly header: string | undefined;
  /**
   * `token` is the token Doorkeeper will authenticate the request with, wherever it was sent (see
   * rails/request-params.ts `doorkeeperToken`), null for none; `headerValue` the configured account
   * header, `peerTrusted` whether the TCP peer is a trusted proxy. Answers synchronously whenever no
   * I/O is needed (token and header modes, introspection cache hits), so the hot path can skip an await.
   */
  resolve(
    token: string | null,
    headerValue: string | undefined,
    peerTrusted: boolean,
    digest?: TokenDigestOf,
  ): AccountKey | Promise<AccountKey>;
  /**
   * The answer `resolve` would give without any I/O, or undefined when it would have to ask the
   * upstream: the gateway then first checks what it can refuse without the account.
   */
  known(
    token: string | null,
    headerValue: string | undefined,
    peerTrusted: boolean,
    digest?: TokenDigestOf,
  ): AccountKey | undefined;
  /**
   * What the upstream last told of an account `resolve` gave (introspect mode), or undefined: not
   * told (token and header modes, a token the upstream will not name, an error, an evicted entry).
   */
  facts(accountKey: string): AccountFacts | undefined;
  /**
   * Whether `resolve` would now start an upstream call for this token (introspect mode: a token worth
   * asking about, not cached, no call for it already in flight). What the introspection budget charges.
   */
  introspects(token: string | null, digest?: TokenDigestOf): boolean;
}

/** The values of `rategate_introspections_total{result}`: each upstream answer's kind, and the calls the budget refused. */
export const INTROSPECTION_RESULTS = ['ok', 'invalid', 'forbidden', 'error', 'budget_exhausted'] as const;
export type IntrospectionResult = (typeof INTROSPECTION_RESULTS)[number];

/** The metric's name for an answer of the upstream. */
export function introspectionResult(result: IntrospectResult): IntrospectionResult {
  switch (result.kind) {
    case 'account':
      return 'ok';
    case 'anonymous':
      return 'invalid';
    case 'token':
      return 'forbidden';
    case 'error':
      return 'error';
  }
}

const NEVER_INTROSPECTS = (): boolean => false;

const NO_FACTS = (): undefined => undefined;

/** Where the token's SHA-256 was already taken (the request's view holds it): read, not hashed again. */
export interface TokenDigestOf {
  tokenDigest(): string | null;
}

/** The digest of `token`, from the request's view when it has one. */
function digestOf(token: string, from: TokenDigestOf | undefined): string {
  return from?.tokenDigest() ?? tokenDigest(token);
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

/** How long an invalid answer is believed by default (`clients.account.introspection.invalidTtl`). */
export const DEFAULT_INVALID_TTL_MS = 60_000;

/** SHA-256 of a token, hex. Security: the only form of a token that is kept, keyed on, or shown. */
export function tokenDigest(token: string): string {
  return hash('sha256', token, 'hex');
}

const ERROR: IntrospectResult = Object.freeze({ kind: 'error' });

export function createAccountResolver(opts: AccountOptions): AccountResolver {
  switch (opts.from) {
    case 'token': {
      // Any syntactically valid token counts, valid upstream or not: rotating junk tokens only
      // spreads requests over fresh account buckets, and per-IP rules still count every one.
      const fromToken = (
        token: string | null,
        _header?: string,
        _trusted?: boolean,
        digest?: TokenDigestOf,
      ): AccountKey => (token === null ? null : accountKeyFromDigest(digestOf(token, digest)));
      return {
        from: 'token',
        header: undefined,
        resolve: fromToken,
        known: fromToken,
        facts: NO_FACTS,
        introspects: NEVER_INTROSPECTS,
      };
    }
    case 'header': {
      const header = opts.header.trim().toLowerCase();
      if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(header)) throw new Error(`invalid account header name "${opts.header}"`);
      const fromHeader = (headerValue: string | undefined, peerTrusted: boolean): AccountKey => {
        // Security: the header names an account only when a trusted proxy set it. From anyone else a
        // client could name any account (draining a victim's bucket) or a fresh one per request.
        if (!peerTrusted || headerValue === undefined) return null;
        return accountKeyFromHeader(headerValue);
      };
      return {
        from: 'header',
        header,
        resolve: (_token, headerValue, peerTrusted) => fromHeader(headerValue, peerTrusted),
        known: (_token, headerValue, peerTrusted) => fromHeader(headerValue, peerTrusted),
        facts: NO_FACTS,
        introspects: NEVER_INTROSPECTS,
      };
    }
    case 'introspect':
      return createIntrospectingResolver(opts);
  }
}

function createIntrospectingResolver(opts: Extract<AccountOptions, { from: 'introspect' }>): AccountResolver {
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
    let call: Promise<IntrospectResult>;
    try {
      call = introspect(token);
    } catch {
      // A synchronous throw must still settle after `resolve` has registered the flight below,
      // or the `finally` would run first and leave a settled promise in `inflight` for good.
      call = Promise.resolve(ERROR);
    }
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

  const cached = (digest: string): CacheEntry | undefined => cache.get(digest);

  function introspects(token: string | null, from?: TokenDigestOf): boolean {
    if (token === null || !isIntrospectable(token)) return false;
    const digest = digestOf(token, from);
    return !inflight.has(digest) && cached(digest) === undefined;
  }

  function knownToken(
    token: string | null,
    _header?: string,
    _trusted?: boolean,
    from?: TokenDigestOf,
  ): AccountKey | undefined {
    if (token === null || !isIntrospectable(token)) return null;
    return cached(digestOf(token, from))?.key;
  }

  function resolveToken(
    token: string | null,
    _header?: string,
    _trusted?: boolean,
    from?: TokenDigestOf,
  ): AccountKey | Promise<AccountKey> {
    if (token === null || !isIntrospectable(token)) return null;
    const digest = digestOf(token, from);
    const hit = cached(digest);
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

/** @module The account resolver's contract: what the upstream answers, the options, and the resolver's shape. */
import type { AccountFacts } from './account-facts.js';
import type { TokenDigestOf } from './token-digest.js';

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

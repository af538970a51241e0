/** @module The account a request is counted against: token digest, trusted header, or introspection. */
import { accountKeyFromDigest, accountKeyFromHeader } from './account-key.js';
import type { AccountKey, AccountOptions, AccountResolver, IntrospectResult } from './account-types.js';
import { createIntrospectingResolver } from './introspecting-resolver.js';
import { digestOf, type TokenDigestOf } from './token-digest.js';

export { accountKeyFromHeader, accountKeyFromId } from './account-key.js';
export type { AccountKey, AccountOptions, AccountResolver, Introspect, IntrospectResult } from './account-types.js';
export { DEFAULT_INVALID_TTL_MS } from './introspecting-resolver.js';
export { isIntrospectable, MAX_INTROSPECTED_TOKEN, tokenDigest, type TokenDigestOf } from './token-digest.js';

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

/**
 * @module Bucket keys: `<rule>:<hash tag>`, where the tag names the identity counted (`{ip:…}`,
 * `{acct:…}`, `{tok:…}`, `{hdr:…}`, `{prm:…}`, `{ck:…}`, `{global}`). On Redis Cluster only the tag is hashed, so
 * all of one identity's buckets share a slot and its usual request is one atomic script call; the stores
 * add their own prefix. An override's bucket is `<rule>:o<N>:<tag>`: its own, beside the rule's default.
 */

import type { Per } from '../config/types.js';

/** What a rule counts per (the config's `per`, without a header's or parameter's name). */
export type KeyKind = Per;

const GLOBAL_TAG = '{global}';

/**
 * A rule's key prefix, built once per snapshot. `override` ≥ 0 names the rule's override of that
 * position: its clients count in buckets of their own, never in the default one.
 */
export function ruleKeyPrefix(ruleName: string, override = -1): string {
  return override < 0 ? `${ruleName}:` : `${ruleName}:o${override}:`;
}

/**
 * The key of the bucket a rule with `prefix` (from ruleKeyPrefix) counts this request in, or null when
 * the request lacks what the rule counts per (no account, no token, no header or parameter value): the
 * rule is then skipped. `valueDigest` is the SHA-256 hex of the token, header or parameter value (never
 * the value itself: tokens are secrets, e-mail addresses personal data). Called per bucket on the
 * request path: plain concatenation, nothing allocated but the key.
 */
export function bucketKey(prefix: string, per: KeyKind, ipKey: string, accountKey: string | null, valueDigest: string | null = null): string | null {
  switch (per) {
    case 'ip':
      return `${prefix}{ip:${ipKey}}`;
    case 'account':
      return accountKey === null ? null : `${prefix}{acct:${accountKey}}`;
    case 'global':
      return prefix + GLOBAL_TAG;
    case 'token':
      return valueDigest === null ? null : `${prefix}{tok:${valueDigest}}`;
    case 'header':
      return valueDigest === null ? null : `${prefix}{hdr:${valueDigest}}`;
    case 'param':
      return valueDigest === null ? null : `${prefix}{prm:${valueDigest}}`;
    case 'cookie':
      return valueDigest === null ? null : `${prefix}{ck:${valueDigest}}`;
  }
}

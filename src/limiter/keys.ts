/**
 * @module Bucket keys: `<rule>:<hash tag>`, where the tag names the identity counted (`{ip:…}`,
 * `{acct:…}`, `{global}`). On Redis Cluster only the tag is hashed, so all of one identity's buckets
 * share a slot and its usual request is one atomic script call; the stores add their own prefix.
 */

/** What a rule counts per (the config's `per`). */
export type Per = 'ip' | 'account' | 'global';

const GLOBAL_TAG = '{global}';

/** A rule's key prefix, built once per snapshot. */
export function ruleKeyPrefix(ruleName: string): string {
  return `${ruleName}:`;
}

/**
 * The key of the bucket a rule with `prefix` (from ruleKeyPrefix) counts this request in, or null for
 * a `per: account` rule when the request has no account (the rule is then skipped). Called per bucket
 * on the request path: plain concatenation, nothing allocated but the key.
 */
export function bucketKey(prefix: string, per: Per, ipKey: string, accountKey: string | null): string | null {
  if (per === 'ip') return `${prefix}{ip:${ipKey}}`;
  if (per === 'account') return accountKey === null ? null : `${prefix}{acct:${accountKey}}`;
  return prefix + GLOBAL_TAG;
}

/**
 * @module Bucket keys: `<rule>:{<tag>}`, where the tag names the identity counted (`{ip:…}`, `{acct:…}`,
 * `{tok:…}`, `{global}`: keys/kinds.ts spells each kind's). On Redis Cluster only the tag is hashed, so
 * all of one identity's buckets share a slot and its usual request is one atomic script call; the stores
 * add their own prefix. An override's bucket is `<rule>:o<N>:{<tag>}`: its own, beside the rule's default.
 */

/**
 * A rule's key prefix, built once per snapshot. `override` ≥ 0 names the rule's override of that
 * position: its clients count in buckets of their own, never in the default one.
 */
export function ruleKeyPrefix(ruleName: string, override = -1): string {
  return override < 0 ? `${ruleName}:` : `${ruleName}:o${override}:`;
}

/**
 * The key of the bucket a rule with `prefix` (from ruleKeyPrefix) counts a request in, from the tag
 * of its key (keys/rule-key.ts `RuleKey.tag`): digests only, never a token or an e-mail address.
 * Called per bucket on the request path: plain concatenation.
 */
export function bucketKey(prefix: string, tag: string): string {
  return `${prefix}{${tag}}`;
}

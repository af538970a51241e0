/**
 * @module Resets every bucket one client IP spends in (its `per: ip` rules and their overrides), for a
 * lifted block or IP ban (`?resetBuckets=true`): a client let back in starts with full buckets. Buckets
 * that combine the IP with something else name no single bucket to reset and are left as they are.
 */
import { isClientIpKey, KINDS, tagOf } from '../keys/index.js';
import { bucketKey, ruleKeyPrefix } from '../limiter/keys.js';
import type { Store } from '../limiter/types.js';
import { bucketSpec, type RequestPolicy } from '../pipeline/policy.js';

/** The number of buckets reset. */
export async function resetIpBuckets(policy: RequestPolicy, store: Store, ipKey: string): Promise<number> {
  const resets: Promise<void>[] = [];
  const tag = tagOf(KINDS.ip, ipKey);
  for (const rule of policy.snapshot.rules) {
    if (!isClientIpKey(rule.key)) continue;
    resets.push(store.reset(bucketSpec(policy, rule, bucketKey(ruleKeyPrefix(rule.name), tag))));
    rule.overrides.forEach((o, i) => {
      resets.push(store.reset(bucketSpec(policy, o.rule, bucketKey(ruleKeyPrefix(rule.name, i), tag))));
    });
  }
  await Promise.all(resets);
  return resets.length;
}

/**
 * @module Resets every bucket one client IP spends in (its `per: ip` rules and their overrides), for a
 * lifted block or IP ban (`?resetBuckets=true`): a client let back in starts with full buckets. Buckets
 * that combine the IP with something else (`per: [signature:domain, ip]`) are not named by the IP alone:
 * those this replica refused the client in are (guard/limited-composites.ts).
 */
import { isClientIpKey, KINDS, tagOf } from '../keys/index.js';
import { bucketKey, ruleKeyPrefix } from '../limiter/keys.js';
import type { Store } from '../limiter/types.js';
import type { CompiledRule } from '../config/types.js';
import type { LimitedComposites } from '../guard/limited-composites.js';
import { bucketSpec, type RequestPolicy } from '../pipeline/policy.js';

/** The number of buckets reset. */
export async function resetIpBuckets(
  policy: RequestPolicy,
  store: Store,
  ipKey: string,
  composites?: LimitedComposites,
): Promise<number> {
  const resets: Promise<void>[] = [];
  const tag = tagOf(KINDS.ip, ipKey);
  for (const rule of policy.snapshot.rules) {
    if (!isClientIpKey(rule.key)) continue;
    resets.push(store.reset(bucketSpec(policy, rule, bucketKey(ruleKeyPrefix(rule.name), tag))));
    rule.overrides.forEach((o, i) => {
      resets.push(store.reset(bucketSpec(policy, o.rule, bucketKey(ruleKeyPrefix(rule.name, i), tag))));
    });
  }
  for (const key of composites?.take(tag) ?? []) {
    const rule = ruleOfKey(policy, key);
    if (rule !== undefined) resets.push(store.reset(bucketSpec(policy, rule, key)));
  }
  await Promise.all(resets);
  return resets.length;
}

/** The rule (or override variant) a bucket key belongs to, from its prefix: `inbox:{…}`, `inbox:o0:{…}`. */
function ruleOfKey(policy: RequestPolicy, key: string): CompiledRule | undefined {
  const m = /^([A-Za-z0-9_.-]+):(?:o(\d+):)?\{/.exec(key);
  const rule = m === null ? undefined : policy.snapshot.rules.find((r) => r.name === m[1]);
  if (rule === undefined || m![2] === undefined) return rule;
  return rule.overrides[Number(m![2])]?.rule;
}

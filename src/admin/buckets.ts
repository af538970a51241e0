/**
 * @module `/admin/buckets?rule=NAME&key=IP-OR-ACCOUNT`: GET shows one bucket, DELETE resets it. The key
 * is what an operator knows (an IP, an account id or header value, a token digest), turned into the
 * bucket key exactly as the request path does it.
 */
import { ipBucketKey, accountKeyNamedBy } from '../identity/index.js';
import type { Store } from '../limiter/types.js';
import { bucketKey, ruleKeyPrefix } from '../limiter/keys.js';
import { bucketSpec, type RequestPolicy } from '../server/policy.js';
import { valueDigest } from '../server/rule-facts.js';
import { iso8601Micro } from '../server/ratelimit-headers.js';

export type BucketsAnswer = { status: number; body: unknown };

export async function bucketsEndpoint(
  method: string,
  params: URLSearchParams,
  policy: RequestPolicy,
  store: Store,
): Promise<BucketsAnswer> {
  const ruleName = params.get('rule');
  const rule = policy.snapshot.rules.find((r) => r.name === ruleName);
  if (!rule) {
    return { status: 404, body: { error: `unknown rule ${JSON.stringify(ruleName)}`, rules: policy.snapshot.rules.map((r) => r.name) } };
  }
  const key = params.get('key') ?? '';
  let ipKey = '';
  let accountKey: string | null = null;
  if (rule.per === 'ip') {
    const k = ipBucketKey(key, policy.snapshot.config.clients.ipv6Prefix);
    if (k === null) return { status: 400, body: { error: `key must be an IP address for rule ${rule.name} (per: ip)` } };
    ipKey = k;
  } else if (rule.per === 'account') {
    const from = policy.snapshot.config.clients.account.from;
    accountKey = accountKeyNamedBy(from, key);
    if (accountKey === null) {
      const hint = from === 'token' ? "the token's SHA-256 digest (hex)" : from === 'header' ? 'the account header value' : 'the account id';
      return { status: 400, body: { error: `key must be ${hint} for rule ${rule.name} (per: account)` } };
    }
  }
  let digest: string | null = null;
  if (rule.per === 'token' || rule.per === 'header' || rule.per === 'param' || rule.per === 'cookie') {
    // Tokens are named by their digest (as exempt.accounts names them); header, parameter and cookie values as sent.
    digest = rule.per === 'token' && /^[0-9a-f]{64}$/i.test(key) ? key.toLowerCase() : key.trim() === '' ? null : valueDigest(key.trim());
    if (digest === null) return { status: 400, body: { error: `key must be the ${rule.per === 'token' ? "token's SHA-256 digest" : 'value'} for rule ${rule.name} (per: ${rule.per})` } };
  }
  const prefix = ruleKeyPrefix(rule.name);
  const spec = bucketSpec(policy, rule, bucketKey(prefix, rule.per, ipKey, accountKey, digest)!);

  if (method === 'DELETE') {
    await store.reset(spec);
    return { status: 200, body: { rule: rule.name, key: spec.key, reset: true } };
  }
  if (method !== 'GET') return { status: 405, body: { error: 'use GET or DELETE' } };
  const state = await store.peek(spec);
  return {
    status: 200,
    body: {
      rule: rule.name,
      key: spec.key,
      algorithm: rule.algorithm,
      limit: rule.limit,
      periodMs: rule.periodMs,
      remaining: state.remaining,
      limited: state.limited,
      resetAt: iso8601Micro(state.resetAt),
      retryAt: iso8601Micro(state.retryAt),
    },
  };
}

/**
 * @module `/admin/buckets?rule=NAME&key=IP-OR-ACCOUNT`: GET shows one bucket, DELETE resets it. The key
 * is what an operator knows (an IP, an account id or header value, a token digest), turned into the
 * bucket key exactly as the request path does it.
 */
import { ipBucketKey, accountKeyNamedBy } from '../identity/index.js';
import type { BucketSpec, Store } from '../limiter/types.js';
import { bucketsFor, type RequestPolicy } from '../server/policy.js';
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
  const spec: BucketSpec = bucketsFor(policy, [rule], ipKey, accountKey).specs[0]!;

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

/**
 * @module `/admin/buckets?rule=NAME&key=IP-OR-ACCOUNT[&override=N]`: GET shows one bucket, DELETE resets
 * it. The key is what an operator knows (an IP, an account id or header value, a token digest), turned
 * into the bucket key exactly as the request path does it, an override's bucket included (named by
 * `override=N`, or found from the key as a request would find it). A missing parameter is answered 400
 * with what can be asked: the rules, and a rule's recently limited keys.
 */
import { ipBucketKey, accountKeyNamedBy } from '../identity/index.js';
import type { Store } from '../limiter/types.js';
import type { CompiledRule } from '../config/types.js';
import { bucketKey, ruleKeyPrefix } from '../limiter/keys.js';
import { bucketSpec, overrideFor, type RequestPolicy } from '../pipeline/policy.js';
import type { TopLimited } from '../guard/top-keys.js';
import { formatDuration } from '../config/fields/duration.js';
import { keyValueDigest, valueDigest } from '../rails/index.js';
import { iso8601Micro } from '../pipeline/ratelimit-headers.js';

export type BucketsAnswer = { status: number; body: unknown };

export async function bucketsEndpoint(method: string, params: URLSearchParams, policy: RequestPolicy, store: Store, top?: TopLimited): Promise<BucketsAnswer> {
  const ruleName = params.get('rule');
  const rules = policy.snapshot.rules.map((r) => ({
    name: r.name,
    per: r.per === 'header' || r.per === 'param' ? `${r.per}:${r.keyName}` : r.per,
    limit: r.limit,
    period: formatDuration(r.periodMs),
    overrides: r.overrides.length,
  }));
  if (ruleName === null || ruleName === '') {
    return { status: 400, body: { error: 'missing rule: use /admin/buckets?rule=NAME&key=IP-OR-ACCOUNT (one of the rules below)', rules } };
  }
  let rule = policy.snapshot.rules.find((r) => r.name === ruleName);
  if (!rule) {
    return { status: 404, body: { error: `unknown rule ${JSON.stringify(ruleName)}`, rules: policy.snapshot.rules.map((r) => r.name) } };
  }
  const key = params.get('key') ?? '';
  if (key === '' && rule.per !== 'global') {
    return {
      status: 400,
      body: { error: `missing key: the client of rule ${rule.name} (per: ${rule.per}), e.g. &key=203.0.113.7`, recentlyLimited: top?.top(rule.name, 20) ?? [] },
    };
  }
  const overrideParam = params.get('override');
  let override = -1;
  if (overrideParam !== null) {
    override = Number(overrideParam);
    if (!Number.isInteger(override) || override < 0 || override >= rule.overrides.length) {
      return { status: 400, body: { error: `override must be an index of rule ${rule.name}'s overrides (it has ${rule.overrides.length})` } };
    }
  }
  const named = clientNamedBy(rule, key, policy);
  if ('status' in named) return named;
  const { ipKey, accountKey, digest } = named;
  // As a request would: the client an override names counts in that override's bucket.
  if (override < 0) override = overrideFor(policy.overrides[rule.index] ?? [], rule.per === 'ip' ? key : '', accountKey, digest);
  const base = rule;
  if (override >= 0) rule = base.overrides[override]!.rule;
  const prefix = ruleKeyPrefix(rule.name, override);
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
      ...(override >= 0 ? { override } : {}),
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

/** The parts of a bucket key that an operator's `key=` names for this rule, or the 400 that says what it must be. */
function clientNamedBy(
  rule: CompiledRule,
  key: string,
  policy: RequestPolicy,
): { ipKey: string; accountKey: string | null; digest: string | null } | BucketsAnswer {
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
    // Tokens are named by their digest (as exempt.accounts names them); header, parameter and cookie values as sent
    // (cookie values keep their case: a session id is not an e-mail address).
    digest =
      rule.per === 'token' && /^[0-9a-f]{64}$/i.test(key)
        ? key.toLowerCase()
        : key.trim() === ''
          ? null
          : rule.per === 'token' || rule.per === 'cookie'
            ? valueDigest(key.trim())
            : keyValueDigest(rule.per, key);
    if (digest === null)
      return {
        status: 400,
        body: { error: `key must be the ${rule.per === 'token' ? "token's SHA-256 digest" : 'value'} for rule ${rule.name} (per: ${rule.per})` },
      };
  }
  return { ipKey, accountKey, digest };
}

/**
 * @module `/admin/buckets?rule=NAME&key=IP-OR-ACCOUNT[&override=N]`: GET shows one bucket, DELETE resets
 * it. The key is what an operator knows (an IP, an account id or header value, a token digest, a header,
 * parameter, cookie or claim value), turned into the bucket key exactly as the request path does it by
 * the rule's key kind (keys/kinds.ts), an override's bucket included (named by `override=N`, or found
 * from the key as a request would find it). A missing parameter is answered 400 with what can be asked:
 * the rules, and a rule's recently limited keys. A composite key (`per: [signature:domain, ip]`) is named
 * part by part: one `key=` per part, in order.
 */
import type { Store } from '../limiter/types.js';
import type { CompiledRule } from '../config/types.js';
import { bucketKey, ruleKeyPrefix } from '../limiter/keys.js';
import { bucketSpec, overrideFor, type RequestPolicy } from '../pipeline/policy.js';
import type { TopLimited } from '../guard/top-keys.js';
import { formatDuration } from '../config/fields/duration.js';
import { PART_SEPARATOR, tagValue, typedTags } from '../keys/index.js';
import { iso8601Micro } from '../pipeline/ratelimit-headers.js';

export type BucketsAnswer = { status: number; body: unknown };

export async function bucketsEndpoint(
  method: string,
  params: URLSearchParams,
  policy: RequestPolicy,
  store: Store,
  top?: TopLimited,
): Promise<BucketsAnswer> {
  const found = ruleNamed(params, policy, top);
  if ('status' in found) return found;
  const keys = params.getAll('key');
  const named = tagNamedBy(found.rule, keys, policy);
  if (typeof named !== 'string') return named;
  const override = overrideOf(found.rule, params.get('override'), keys, named, policy);
  if (typeof override !== 'number') return override;
  const rule = override >= 0 ? found.rule.overrides[override]!.rule : found.rule;
  const spec = bucketSpec(policy, rule, bucketKey(ruleKeyPrefix(rule.name, override), named));
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

/** The rule `rule=` names, or the 400/404 that lists what can be asked. */
function ruleNamed(
  params: URLSearchParams,
  policy: RequestPolicy,
  top: TopLimited | undefined,
): { rule: CompiledRule } | BucketsAnswer {
  const ruleName = params.get('rule');
  if (ruleName === null || ruleName === '') {
    const rules = policy.snapshot.rules.map((r) => ({
      name: r.name,
      per: r.key.label,
      limit: r.limit,
      period: formatDuration(r.periodMs),
      overrides: r.overrides.length,
    }));
    return {
      status: 400,
      body: { error: 'missing rule: use /admin/buckets?rule=NAME&key=IP-OR-ACCOUNT (one of the rules below)', rules },
    };
  }
  const rule = policy.snapshot.rules.find((r) => r.name === ruleName);
  if (!rule)
    return {
      status: 404,
      body: { error: `unknown rule ${JSON.stringify(ruleName)}`, rules: policy.snapshot.rules.map((r) => r.name) },
    };
  const key = params.get('key') ?? '';
  if (key === '' && rule.key.parts.some((p) => p.spec.operatorNames !== 'nothing')) {
    return {
      status: 400,
      body: {
        error: `missing key: the client of rule ${rule.name} (per: ${rule.key.label}), e.g. &key=203.0.113.7`,
        recentlyLimited: top?.top(rule.name, 20) ?? [],
      },
    };
  }
  return { rule };
}

/** The tag of the bucket an operator's `key=` names for this rule (as its key kind digests it), or the 400 that says what it must be. */
function tagNamedBy(rule: CompiledRule, keys: readonly string[], policy: RequestPolicy): string | BucketsAnswer {
  const tags = typedTags(rule.key, keys.length === 1 ? keys[0]! : keys, policy.typedContext);
  if ('hint' in tags)
    return { status: 400, body: { error: `key must be ${tags.hint} for rule ${rule.name} (per: ${rule.key.label})` } };
  return tags[0]!;
}

/**
 * The override whose bucket is meant: `override=N`, or the first that names this client as a request
 * would find it (by its IP, its account or its key's tag); -1 for the rule's own bucket.
 */
function overrideOf(
  rule: CompiledRule,
  param: string | null,
  keys: readonly string[],
  tag: string,
  policy: RequestPolicy,
): number | BucketsAnswer {
  if (param !== null) {
    const n = Number(param);
    if (!Number.isInteger(n) || n < 0 || n >= rule.overrides.length) {
      return {
        status: 400,
        body: { error: `override must be an index of rule ${rule.name}'s overrides (it has ${rule.overrides.length})` },
      };
    }
    return n;
  }
  const parts = rule.key.parts;
  const ip = parts.findIndex((p) => p.spec.operatorNames === 'client-ip');
  const account = parts.findIndex((p) => p.spec.operatorNames === 'account');
  const address = ip < 0 ? '' : (keys[ip] ?? '').trim();
  const accountKey = account < 0 ? null : tagValue(tag.split(PART_SEPARATOR)[account] ?? '');
  return overrideFor(policy.overrides[rule.index] ?? [], address, accountKey, tag);
}

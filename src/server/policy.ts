/**
 * @module The per-snapshot request policy: identity resolvers, exemptions and bucket templates, built
 * once when a config is loaded so that the request path only looks things up.
 */
import type { CompiledRule, Snapshot, OnError } from '../config/types.js';
import {
  accountKeysNamedBy,
  compileCidrs,
  createAccountResolver,
  createClientIpResolver,
  type AccountResolver,
  type CidrSet,
  type ClientIpResolver,
  type Introspect,
} from '../identity/index.js';
import { bucketKey, ruleKeyPrefix } from '../limiter/keys.js';
import type { BucketSpec } from '../limiter/types.js';
import { compileMatcher, type RuleMatcher } from '../routing/index.js';
import { compileWantedParams, METHOD_PARAM, TOKEN_PARAMS, type WantedParams } from './request-params.js';

export interface RequestPolicy {
  readonly snapshot: Snapshot;
  readonly trustedProxies: CidrSet;
  readonly resolveIp: ClientIpResolver;
  readonly account: AccountResolver;
  /** Lower-case header the account resolver reads (header mode), else undefined. */
  readonly accountHeader: string | undefined;
  readonly exemptIps: CidrSet | null;
  readonly exemptAccounts: ReadonlySet<string> | null;
  /** Per rule index: the store-error policy in force for its buckets. */
  readonly onError: readonly OnError[];
  /** Per rule index: its buckets' key prefix, e.g. `sign-up:`. */
  readonly keyPrefix: readonly string[];
  /** The 429 body, serialized once. */
  readonly limitedBody: Buffer;
  /** The request parameters the gateway reads (Doorkeeper's token, Rack's `_method`), compiled once. */
  readonly wantedParams: WantedParams;
  /** `server.paramPeekBytes`: how much of a body is held to read them. */
  readonly paramPeekBytes: number;
  /** Largest request body for (method, path), in bytes; Infinity for no limit. */
  maxBodySize(method: string, path: string): number;
}

interface BodyLimit {
  readonly patterns: readonly string[];
  readonly max: number;
}

/**
 * Builds the policy for a snapshot. `introspect` asks the upstream about a token (introspect mode);
 * `previous` lets a reload keep the account cache when the account settings did not change.
 */
export function buildRequestPolicy(snapshot: Snapshot, introspect: Introspect, previous?: RequestPolicy): RequestPolicy {
  const cfg = snapshot.config;
  const trustedProxies = compileCidrs(cfg.clients.trustedProxies);
  const acct = cfg.clients.account;
  const sameAccountSettings =
    previous !== undefined && JSON.stringify(previous.snapshot.config.clients.account) === JSON.stringify(acct);
  const account: AccountResolver = sameAccountSettings
    ? previous.account
    : acct.from === 'token'
      ? createAccountResolver({ from: 'token' })
      : acct.from === 'header'
        ? createAccountResolver({ from: 'header', header: acct.header ?? 'x-account-id' })
        : createAccountResolver({ from: 'introspect', introspect, cacheTtlMs: acct.cacheTtl });
  return {
    snapshot,
    trustedProxies,
    resolveIp: createClientIpResolver({ trustedProxies, ipv6Prefix: cfg.clients.ipv6Prefix }),
    account,
    accountHeader: account.header,
    exemptIps: cfg.exempt.ips.length ? compileCidrs(cfg.exempt.ips) : null,
    exemptAccounts: cfg.exempt.accounts.length ? exemptAccountKeys(cfg.exempt.accounts) : null,
    onError: snapshot.rules.map((r) => r.onStoreError ?? cfg.store.onError),
    keyPrefix: snapshot.rules.map((r) => ruleKeyPrefix(r.name)),
    limitedBody: Buffer.from(JSON.stringify(cfg.responses.body)),
    wantedParams: compileWantedParams([...TOKEN_PARAMS, METHOD_PARAM]),
    paramPeekBytes: cfg.server.paramPeekBytes,
    maxBodySize: bodyLimitLookup(cfg.server.bodyLimits, cfg.server.maxBodySize),
  };
}

function bodyLimitLookup(limits: readonly { match: readonly string[]; maxBodySize: number }[], fallback: number) {
  const toMax = (n: number) => (n === 0 ? Infinity : n);
  const defaultMax = toMax(fallback);
  if (limits.length === 0) return () => defaultMax;
  const matcher: RuleMatcher<BodyLimit> = compileMatcher(limits.map((l) => ({ patterns: l.match, max: toMax(l.maxBodySize) })));
  return (method: string, path: string): number => {
    const hit = matcher.match(method, path);
    // The first listed route limit that matches wins over the default.
    return hit.length > 0 ? hit[0]!.max : defaultMax;
  };
}

/**
 * Operators list accounts as they know them: the account id (introspect), the header value (header), or
 * the token's SHA-256 digest (token). Each is turned into the key form the resolver produces.
 */
function exemptAccountKeys(ids: readonly string[]): Set<string> {
  const keys = new Set<string>();
  for (const id of ids) for (const k of accountKeysNamedBy(id)) keys.add(k);
  return keys;
}

/** True when an account key (`a:123`, `h:abc`, `t:<digest>`) names an exempt account. */
export function isExemptAccount(policy: RequestPolicy, accountKey: string): boolean {
  return policy.exemptAccounts !== null && policy.exemptAccounts.has(accountKey);
}

/**
 * The buckets a request is charged in, and the rule of each (same order). Rules `per: account` are
 * skipped for a request with no account. limiter/keys.ts builds the keys (and their hash tags).
 */
export function bucketsFor(
  policy: RequestPolicy,
  rules: readonly CompiledRule[],
  ipKey: string,
  accountKey: string | null,
): { specs: BucketSpec[]; rules: CompiledRule[] } {
  const specs: BucketSpec[] = [];
  const used: CompiledRule[] = [];
  for (const rule of rules) {
    const key = bucketKey(policy.keyPrefix[rule.index]!, rule.per, ipKey, accountKey);
    if (key === null) continue;
    specs.push({
      key,
      limit: rule.limit,
      periodMs: rule.periodMs,
      algorithm: rule.algorithm,
      cost: rule.cost,
      shadow: rule.shadow,
      onError: policy.onError[rule.index]!,
    });
    used.push(rule);
  }
  return { specs, rules: used };
}

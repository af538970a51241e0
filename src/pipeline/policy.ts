/**
 * @module The per-snapshot request policy: identity resolvers, exemptions and bucket templates, built
 * once when a config is loaded so that the request path only looks things up.
 */
import type { CompiledRule, Snapshot, OnError, RuleOverride } from '../config/types.js';
import {
  compileWantedParams,
  keyValueDigest,
  METHOD_PARAM,
  paramNames,
  type RequestFacts,
  ruleValueDigest,
  TOKEN_PARAMS,
  valueDigest,
  type WantedParams,
  whenFails,
  whenQueryNames,
} from '../rails/index.js';
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
import { compileGuardRules, type GuardRules } from '../guard/rules.js';

export interface RequestPolicy {
  readonly snapshot: Snapshot;
  readonly trustedProxies: CidrSet;
  readonly resolveIp: ClientIpResolver;
  readonly account: AccountResolver;
  /** Lower-case header the account resolver reads (header mode), else undefined. */
  readonly accountHeader: string | undefined;
  readonly exemptIps: CidrSet | null;
  /** `block.ips`: answered 403 before anything else; null when none. */
  readonly blockIps: CidrSet | null;
  /** Per rule index, per override: who it names, compiled. Empty for rules without overrides. */
  readonly overrides: readonly (readonly OverrideMatch[])[];
  readonly exemptAccounts: ReadonlySet<string> | null;
  /** Per rule index: the store-error policy in force for its buckets. */
  readonly onError: readonly OnError[];
  /** Per rule index: its buckets' key prefix, e.g. `sign-up:`. */
  readonly keyPrefix: readonly string[];
  /** Every `param:` name of the table, as written: looked up in the request's parameters. */
  readonly paramNames: readonly string[];
  /** Per rule index, per override: that override's key prefix, e.g. `sign-up:o0:`. */
  readonly overridePrefix: readonly (readonly string[])[];
  /** The 429 body, serialized once. */
  readonly limitedBody: Buffer;
  /** The request parameters the gateway reads (Doorkeeper's token, Rack's `_method`), compiled once. */
  readonly wantedParams: WantedParams;
  /** `server.paramPeekBytes`: how much of a body is held to read them. */
  readonly paramPeekBytes: number;
  /** `bans:` and `concurrency:`, compiled (NO_GUARD_RULES when there are none). */
  readonly guard: GuardRules;
  /** Largest request body for (method, path), in bytes; Infinity for no limit. */
  maxBodySize(method: string, path: string): number;
}

/** One override's clients, compiled for lookups. */
export interface OverrideMatch {
  readonly ips: CidrSet | null;
  /** Account keys (every form an id may stand for, as exempt.accounts). */
  readonly accounts: ReadonlySet<string> | null;
  /** Key digests: of a header or parameter value as written; for tokens, the digest given (or the token's). */
  readonly keys: ReadonlySet<string> | null;
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
  const sameAccountSettings = previous !== undefined && JSON.stringify(previous.snapshot.config.clients.account) === JSON.stringify(acct);
  const account: AccountResolver = sameAccountSettings
    ? previous.account
    : acct.from === 'token'
      ? createAccountResolver({ from: 'token' })
      : acct.from === 'header'
        ? createAccountResolver({ from: 'header', header: acct.header ?? 'x-account-id' })
        : createAccountResolver({ from: 'introspect', introspect, cacheTtlMs: acct.cacheTtl });
  const guard = compileGuardRules(cfg);
  const params = [...new Set([...paramNames(snapshot.rules), ...guard.paramNames])];
  return {
    snapshot,
    trustedProxies,
    resolveIp: createClientIpResolver({ trustedProxies, ipv6Prefix: cfg.clients.ipv6Prefix }),
    account,
    accountHeader: account.header,
    exemptIps: cfg.exempt.ips.length ? compileCidrs(cfg.exempt.ips) : null,
    exemptAccounts: cfg.exempt.accounts.length ? exemptAccountKeys(cfg.exempt.accounts) : null,
    blockIps: cfg.block.ips.length ? compileCidrs(cfg.block.ips) : null,
    overrides: snapshot.rules.map((r) => r.overrides.map((o) => compileOverride(r, o))),
    overridePrefix: snapshot.rules.map((r) => r.overrides.map((_, j) => ruleKeyPrefix(r.name, j))),
    paramNames: params,
    guard,
    onError: snapshot.rules.map((r) => r.onStoreError ?? cfg.store.onError),
    keyPrefix: snapshot.rules.map((r) => ruleKeyPrefix(r.name)),
    limitedBody: Buffer.from(JSON.stringify(cfg.responses.body)),
    wantedParams: compileWantedParams([...TOKEN_PARAMS, METHOD_PARAM, ...params, ...whenQueryNames(snapshot.rules)]),
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

function compileOverride(rule: CompiledRule, o: RuleOverride): OverrideMatch {
  const keys = new Set<string>();
  for (const k of o.keys) {
    if (rule.per === 'token') {
      // Operators name tokens by digest (as everywhere else); a raw token given here works too.
      if (/^[0-9a-f]{64}$/i.test(k)) keys.add(k.toLowerCase());
      keys.add(valueDigest(k));
    } else if (rule.per === 'header' || rule.per === 'param') keys.add(keyValueDigest(rule.per, k));
    else keys.add(valueDigest(k.trim()));
  }
  return {
    ips: o.ips.length ? compileCidrs(o.ips) : null,
    accounts: o.accounts.length ? exemptAccountKeys(o.accounts) : null,
    keys: keys.size ? keys : null,
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

/** Who the request is, for the rules: the client, its account (when known) and the request's facts. */
export interface BucketInputs {
  readonly ipKey: string;
  /** The client's address, for overrides by IP. */
  readonly address: string;
  readonly accountKey: string | null;
  /** false: the account is not resolved yet; rules that need it are left out (the early refusal). */
  readonly accountKnown: boolean;
  /** null when no matched rule needs facts (the seed table's case). */
  readonly facts: RequestFacts | null;
}

/**
 * The buckets a request is charged in, and the rule of each (same order). A rule is skipped when its
 * `when` does not hold or the request lacks what it counts per (an account, a token, a header or
 * parameter value); a client an override names counts in that override's bucket under its limit (the
 * rule returned is then the override's variant). limiter/keys.ts builds the keys (and their hash tags).
 */
export function bucketsFor(policy: RequestPolicy, rules: readonly CompiledRule[], who: BucketInputs): { specs: BucketSpec[]; rules: CompiledRule[] } {
  const specs: BucketSpec[] = [];
  const used: CompiledRule[] = [];
  const { ipKey, accountKey, facts } = who;
  for (let rule of rules) {
    let prefix = policy.keyPrefix[rule.index]!;
    let digest: string | null = null;
    // The seed's kind of rule (per ip/account/global, no when, no overrides) takes none of these steps.
    if (rule.needsAccount && !who.accountKnown) continue;
    if (rule.whenAuthenticated !== undefined && rule.whenAuthenticated !== (accountKey !== null)) continue;
    if (rule.needsFacts && facts !== null) {
      if (rule.whenQuery !== null && whenFails(rule, facts, accountKey !== null) !== null) continue;
      digest = ruleValueDigest(rule, facts);
      if (rule.overrides.length > 0) {
        const j = overrideFor(policy.overrides[rule.index]!, who.address, accountKey, digest);
        if (j >= 0) {
          prefix = policy.overridePrefix[rule.index]![j]!;
          rule = rule.overrides[j]!.rule;
        }
      }
    }
    const key = bucketKey(prefix, rule.per, ipKey, accountKey, digest);
    if (key === null) continue;
    specs.push(bucketSpec(policy, rule, key));
    used.push(rule);
  }
  return { specs, rules: used };
}

/** The first override naming this client, or -1. */
export function overrideFor(overrides: readonly OverrideMatch[], address: string, accountKey: string | null, digest: string | null): number {
  for (let j = 0; j < overrides.length; j++) {
    const o = overrides[j]!;
    if (o.ips !== null && address !== '' && o.ips.contains(address)) return j;
    if (o.accounts !== null && accountKey !== null && o.accounts.has(accountKey)) return j;
    if (o.keys !== null && digest !== null && o.keys.has(digest)) return j;
  }
  return -1;
}

/** A rule's bucket under `key`, with the store-error policy in force for it (the request path and the admin API). */
export function bucketSpec(policy: RequestPolicy, rule: CompiledRule, key: string): BucketSpec {
  return {
    key,
    limit: rule.limit,
    periodMs: rule.periodMs,
    algorithm: rule.algorithm,
    cost: rule.cost,
    shadow: rule.shadow,
    onError: policy.onError[rule.index]!,
  };
}

/**
 * @module The per-snapshot request policy: identity resolvers, exemptions and bucket templates, built
 * once when a config is loaded so that the request path only looks things up.
 */
import type { CompiledRule, Snapshot, OnError } from '../config/types.js';
import { compileWantedParams, METHOD_PARAM, TOKEN_PARAMS, type WantedParams, whenQueryNames } from '../rails/index.js';
import { keyParams, NEED, needs, type TypedContext } from '../keys/index.js';
import { RecentBuckets, type RecentBucket } from './recent-buckets.js';
import {
  compileCidrs,
  createClientIpResolver,
  type AccountResolver,
  type CidrSet,
  type ClientIpResolver,
  type Introspect,
} from '../identity/index.js';
import { bucketKey, ruleKeyPrefix } from '../limiter/keys.js';
import type { BucketSpec } from '../limiter/types.js';
import { compileGuardRules, type GuardRules } from '../guard/rules.js';
import { RouteRuleIndex } from './route-rules.js';
import type { Trace } from './trace.js';
import { compileIntrospectionBudget, type IntrospectionBudget } from './introspection-budget.js';
import {
  accountResolverFor,
  bodyLimitLookup,
  compileOverride,
  exemptAccountKeys,
  guardRules,
  type OverrideMatch,
} from './policy-compile.js';
import { ruleTag, whySkipped, type RuleInputs } from './rule-inputs.js';

export type { OverrideMatch } from './policy-compile.js';

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
  /** (method, path) → the limit, ban and in-flight rules that match and what they need, in one walk. */
  readonly routeRules: RouteRuleIndex;
  /** What an operator's key value means under this config (overrides' keys, the admin API). */
  readonly typedContext: TypedContext;
  /** Whether a surge is on now: its rules (`surges[].limits`) count only then. */
  readonly surgeActive: (surge: string) => boolean;
  /** Whether resolving the account reads the token (introspect and token modes: not a trusted header). */
  readonly accountReadsToken: boolean;
  /** `clients.account.introspection.budget`, compiled; null when nothing is introspected or it is off. */
  readonly introspectionBudget: IntrospectionBudget | null;
  /** Largest request body for (method, path), in bytes; Infinity for no limit. */
  maxBodySize(method: string, path: string): number;
  /** Per rule index: the bucket last built for it (bucketsFor), reused while the same client comes again. */
  readonly lastBuckets: (RecentBucket | undefined)[];
  /** Per rule index: the buckets of the clients seen last, by tag (recent-buckets.ts: one bound for the table). */
  readonly recentBuckets: RecentBuckets;
}

/**
 * Builds the policy for a snapshot. `introspect` asks the upstream about a token (introspect mode);
 * `previous` lets a reload keep the account cache when the account settings did not change.
 */
export function buildRequestPolicy(
  snapshot: Snapshot,
  introspect: Introspect,
  previous?: RequestPolicy,
  surgeActive?: (surge: string) => boolean,
): RequestPolicy {
  const cfg = snapshot.config;
  const trustedProxies = compileCidrs(cfg.clients.trustedProxies);
  const acct = cfg.clients.account;
  const account = accountResolverFor(acct, introspect, previous);
  const guard = compileGuardRules(cfg);
  const params = [...new Set([...snapshot.rules.flatMap((r) => keyParams(r.key)), ...guard.paramNames])];
  const typedContext: TypedContext = { ipv6Prefix: cfg.clients.ipv6Prefix, accountFrom: acct.from };
  const routes = cfg.routes.map((r) => r.match);
  const exemptIps = cfg.exempt.ips.length ? compileCidrs(cfg.exempt.ips) : null;
  return {
    snapshot,
    trustedProxies,
    resolveIp: createClientIpResolver({ trustedProxies, ipv6Prefix: cfg.clients.ipv6Prefix, exemptIps }),
    account,
    accountHeader: account.header,
    exemptIps,
    exemptAccounts: cfg.exempt.accounts.length ? exemptAccountKeys(cfg.exempt.accounts) : null,
    blockIps: cfg.block.ips.length ? compileCidrs(cfg.block.ips) : null,
    overrides: snapshot.rules.map((r) => r.overrides.map((o) => compileOverride(r, o, typedContext))),
    overridePrefix: snapshot.rules.map((r) => r.overrides.map((_, j) => ruleKeyPrefix(r.name, j))),
    paramNames: params,
    guard,
    routeRules: new RouteRuleIndex({
      limits: snapshot.rules,
      bans: guard.bans.map((b) => b.rule),
      slots: guard.concurrency.map((c) => c.rule),
      routes,
    }),
    typedContext,
    accountReadsToken: acct.from !== 'header',
    introspectionBudget: compileIntrospectionBudget(cfg),
    surgeActive: surgeActive ?? previous?.surgeActive ?? NO_SURGE,
    onError: snapshot.rules.map((r) => r.onStoreError ?? cfg.store.onError),
    keyPrefix: snapshot.rules.map((r) => ruleKeyPrefix(r.name)),
    limitedBody: Buffer.from(JSON.stringify(cfg.responses.body)),
    wantedParams: compileWantedParams([
      ...TOKEN_PARAMS,
      METHOD_PARAM,
      ...params,
      ...whenQueryNames([...snapshot.rules, ...guardRules(guard)]),
    ]),
    paramPeekBytes: cfg.server.paramPeekBytes,
    maxBodySize: bodyLimitLookup(cfg.server.bodyLimits, cfg.server.maxBodySize),
    lastBuckets: snapshot.rules.map(() => undefined),
    recentBuckets: new RecentBuckets(snapshot.rules.length),
  };
}

/** Without a surge runtime (explain, replay, benchmarks): no surge is on. */
const NO_SURGE = (): boolean => false;

/** True when an account key (`a:123`, `h:abc`, `t:<digest>`) names an exempt account. */
export function isExemptAccount(policy: RequestPolicy, accountKey: string): boolean {
  return policy.exemptAccounts !== null && policy.exemptAccounts.has(accountKey);
}

/** A request's buckets and the rule of each (same order). */
export interface Buckets {
  specs: BucketSpec[];
  rules: CompiledRule[];
}

/**
 * The buckets a request is charged in, and the rule of each (same order). A rule is skipped when its
 * `when` does not hold or the request lacks its key (ruleTag); while the account is not known
 * (`accountKnown` false: the early refusal), rules that need it are left out. A client an override
 * names counts in that override's bucket under its limit (the rule returned is then the override's
 * variant). With a trace, each rule's outcome is noted.
 */
export function bucketsFor(
  policy: RequestPolicy,
  rules: readonly CompiledRule[],
  who: RuleInputs,
  accountKnown = true,
  trace: Trace | null = null,
): Buckets {
  const specs: BucketSpec[] = [];
  const used: CompiledRule[] = [];
  // Indexed loops on the request path: `for…of` over a frozen array runs the iterator protocol in full.
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i]!;
    if (!accountKnown && needs(rule.needs, NEED.account)) continue;
    if (rule.surge !== null && !policy.surgeActive(rule.surge)) {
      if (trace !== null) trace.skipped(rule, `surge ${rule.surge} is not on`);
      continue;
    }
    const tag = ruleTag(rule, who);
    if (tag === null) {
      if (trace !== null) trace.skipped(rule, whySkipped(rule, who));
      continue;
    }
    let effective = rule;
    let j = -1;
    if (rule.overrides.length > 0) {
      j = overrideFor(policy.overrides[rule.index]!, who.client.address, who.accountKey, tag);
      if (j >= 0) effective = rule.overrides[j]!.rule;
    }
    const spec = specOf(policy, rule.index, effective, tag, j);
    specs.push(spec);
    used.push(effective);
    if (trace !== null) trace.counted(rule, effective, tag, spec.key);
  }
  return { specs, rules: used };
}

/**
 * The bucket of rule `index` (or its override `j`) for `tag`: the one built for this client last (the
 * last request's, or a refused client's: rememberRefused), so a client seen again costs no key string
 * and the stores find its key's hash computed. Specs are never changed once built, so sharing one
 * across requests is safe.
 */
function specOf(policy: RequestPolicy, index: number, effective: CompiledRule, tag: string, j: number): BucketSpec {
  const last = policy.lastBuckets[index];
  if (last !== undefined && last.tag === tag && last.rule === effective) return last.spec;
  let seen = policy.recentBuckets.get(index, tag);
  if (seen === undefined || seen.rule !== effective) {
    const prefix = j >= 0 ? policy.overridePrefix[index]![j]! : policy.keyPrefix[index]!;
    seen = { tag, rule: effective, spec: bucketSpec(policy, effective, bucketKey(prefix, tag)), kept: false };
  }
  policy.lastBuckets[index] = seen;
  return seen.spec;
}

/**
 * A refused request's buckets, kept for its client's next requests (recent-buckets.ts): a flood from
 * many clients taking turns finds each one's keys built and hashed. Only refusals are kept, so a
 * stream of new clients that are admitted costs a look-up each, not an entry.
 */
export function rememberRefused(policy: RequestPolicy, b: Buckets): void {
  for (let i = 0; i < b.specs.length; i++) {
    const index = b.rules[i]!.index;
    // The rule's last bucket is this request's unless another request was decided meanwhile (a store wait).
    const last = policy.lastBuckets[index];
    if (last !== undefined && !last.kept && last.spec === b.specs[i]) policy.recentBuckets.keep(index, last);
  }
}

/** The first override naming this client (by its address, its account, or its key's tag), or -1. */
export function overrideFor(
  overrides: readonly OverrideMatch[],
  address: string,
  accountKey: string | null,
  tag: string | null,
): number {
  for (let j = 0; j < overrides.length; j++) {
    const o = overrides[j]!;
    if (o.ips !== null && address !== '' && o.ips.contains(address)) return j;
    if (o.accounts !== null && accountKey !== null && o.accounts.has(accountKey)) return j;
    if (o.keys !== null && tag !== null && o.keys.has(tag)) return j;
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

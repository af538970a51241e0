/**
 * @module The parts of a request policy compiled from the config when it is loaded: the account
 * resolver (kept across a reload that leaves its settings alone), the overrides' clients, the exempt
 * accounts and the body-size limits by route (pipeline/policy.ts puts them together).
 */
import type { CompiledRule, RuleOverride, Snapshot } from '../config/types.js';
import { typedTags, type TypedContext } from '../keys/index.js';
import {
  accountKeysNamedBy,
  compileCidrs,
  createAccountResolver,
  type AccountResolver,
  type CidrSet,
  type Introspect,
} from '../identity/index.js';
import { compileMatcher, type RuleMatcher } from '../routing/index.js';
import type { GuardRules } from '../guard/rules.js';

/** One override's clients, compiled for lookups. */
export interface OverrideMatch {
  readonly ips: CidrSet | null;
  /** Account keys (every form an id may stand for, as exempt.accounts). */
  readonly accounts: ReadonlySet<string> | null;
  /** Key tags (`tok:<digest>`, `hdr:<digest>`…) the override's `keys` stand for (keys/kinds.ts `typed`). */
  readonly keys: ReadonlySet<string> | null;
}

interface BodyLimit {
  readonly patterns: readonly string[];
  readonly max: number;
}

/** The account resolver of `acct`: the previous policy's while the account settings are the same (its cache stays). */
export function accountResolverFor(
  acct: Snapshot['config']['clients']['account'],
  introspect: Introspect,
  previous: { readonly snapshot: Snapshot; readonly account: AccountResolver } | undefined,
): AccountResolver {
  const sameAccountSettings =
    previous !== undefined && JSON.stringify(previous.snapshot.config.clients.account) === JSON.stringify(acct);
  return sameAccountSettings
    ? previous.account
    : acct.from === 'token'
      ? createAccountResolver({ from: 'token' })
      : acct.from === 'header'
        ? createAccountResolver({ from: 'header', header: acct.header ?? 'x-account-id' })
        : createAccountResolver({
            from: 'introspect',
            introspect,
            cacheTtlMs: acct.cacheTtl,
            invalidTtlMs: acct.introspection.invalidTtl,
          });
}

/** The rules of `bans:` and `concurrency:`. */
export function guardRules(guard: GuardRules): CompiledRule[] {
  return [...guard.bans.map((b) => b.rule), ...guard.concurrency.map((c) => c.rule)];
}

export function bodyLimitLookup(
  limits: readonly { match: readonly string[]; maxBodySize: number }[],
  fallback: number,
) {
  const toMax = (n: number) => (n === 0 ? Infinity : n);
  const defaultMax = toMax(fallback);
  if (limits.length === 0) return () => defaultMax;
  const matcher: RuleMatcher<BodyLimit> = compileMatcher(
    limits.map((l) => ({ patterns: l.match, max: toMax(l.maxBodySize) })),
  );
  return (method: string, path: string): number => {
    const hit = matcher.match(method, path);
    // The first listed route limit that matches wins over the default.
    return hit.length > 0 ? hit[0]!.max : defaultMax;
  };
}

export function compileOverride(rule: CompiledRule, o: RuleOverride, ctx: TypedContext): OverrideMatch {
  const keys = new Set<string>();
  for (const k of o.keys) {
    const tags = typedTags(rule.key, k, ctx);
    if (Array.isArray(tags)) for (const t of tags) keys.add(t);
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
export function exemptAccountKeys(ids: readonly string[]): Set<string> {
  const keys = new Set<string>();
  for (const id of ids) for (const k of accountKeysNamedBy(id)) keys.add(k);
  return keys;
}

/**
 * @module The `bans:` and `concurrency:` sections compiled once per snapshot (like the limit table), and
 * how a request's key for one of them is found: the same `per`/`when` machinery as a limit rule, so a
 * ban or in-flight rule keys a request exactly as a limit rule with the same `per` would.
 */
import { compileRule } from '../config/compile.js';
import type { Config } from '../config/schema.js';
import type { CompiledRule } from '../config/types.js';
import { bucketKey, ruleKeyPrefix } from '../limiter/keys.js';
import { compileMatcher, type RuleMatcher } from '../routing/index.js';
import { ruleValueDigest, whenFails, type RequestFacts } from '../rails/index.js';

export interface CompiledBan {
  readonly rule: CompiledRule;
  /** `on.status`, or null: every matching request counts. */
  readonly on: ReadonlySet<number> | null;
  readonly limit: number;
  readonly periodMs: number;
  readonly banMs: number;
  /** Live bans this ban may hold; a new one beyond it ends the oldest. */
  readonly maxActive: number;
}

export interface CompiledConcurrency {
  readonly rule: CompiledRule;
  readonly max: number;
  readonly scope: 'local' | 'store';
  /** `<name>:` : the prefix of its slot keys. */
  readonly prefix: string;
}

export interface GuardRules {
  readonly bans: readonly CompiledBan[];
  readonly banMatcher: RuleMatcher<CompiledRule> | null;
  readonly concurrency: readonly CompiledConcurrency[];
  readonly concurrencyMatcher: RuleMatcher<CompiledRule> | null;
  /** `param:` names the bans and in-flight rules read (added to what the body peek looks for). */
  readonly paramNames: readonly string[];
  /** Whether any ban or in-flight rule needs the account (it is then resolved for matching requests). */
  readonly needsAccount: boolean;
}

export const NO_GUARD_RULES: GuardRules = Object.freeze({
  bans: [],
  banMatcher: null,
  concurrency: [],
  concurrencyMatcher: null,
  paramNames: [],
  needsAccount: false,
});

/** Compiled at load; an empty table compiles to NO_GUARD_RULES, which the request path skips at once. */
export function compileGuardRules(cfg: Pick<Config, 'bans' | 'concurrency'>): GuardRules {
  if (cfg.bans.length === 0 && cfg.concurrency.length === 0) return NO_GUARD_RULES;
  const asRule = (
    r: { name: string; match: string[]; per: string; when?: { authenticated?: boolean | undefined; query?: string[] | undefined } | undefined },
    i: number,
    limit: number,
    period: number,
  ) => compileRule({ name: r.name, match: r.match, per: r.per, when: r.when, limit, period, algorithm: 'fixed-window', cost: 1, shadow: false }, i);
  const bans = cfg.bans.map((b, i) => ({
    rule: asRule(b, i, b.limit, b.period),
    on: b.on ? new Set(b.on.status) : null,
    limit: b.limit,
    periodMs: b.period,
    banMs: b.ban,
    maxActive: b.maxActive,
  }));
  const concurrency = cfg.concurrency.map((c, i) => ({ rule: asRule(c, i, c.max, 1000), max: c.max, scope: c.scope, prefix: ruleKeyPrefix(c.name) }));
  const all = [...bans.map((b) => b.rule), ...concurrency.map((c) => c.rule)];
  return Object.freeze({
    bans,
    banMatcher: bans.length > 0 ? compileMatcher(bans.map((b) => b.rule)) : null,
    concurrency,
    concurrencyMatcher: concurrency.length > 0 ? compileMatcher(concurrency.map((c) => c.rule)) : null,
    paramNames: [...new Set(all.filter((r) => r.per === 'param').map((r) => r.keyName))],
    needsAccount: all.some((r) => r.needsAccount),
  });
}

/** Who a request is, for bans and in-flight rules. `account` undefined: not known (no rule needed it). */
export interface GuardWho {
  readonly ipKey: string;
  readonly account: string | null | undefined;
  readonly facts: RequestFacts;
}

/**
 * The request's key for a ban or in-flight rule, e.g. `ip:203.0.113.7`, `acct:a:42`, `tok:<sha256>`;
 * null when the rule does not apply to it (its `when` fails, or it lacks what the rule counts per).
 */
export function guardKey(rule: CompiledRule, who: GuardWho): string | null {
  const account = who.account ?? null;
  if (rule.needsAccount && who.account === undefined) return null;
  if (whenFails(rule, who.facts, account !== null) !== null) return null;
  const digest = rule.needsFacts ? ruleValueDigest(rule, who.facts) : null;
  const tag = bucketKey('', rule.per, who.ipKey, account, digest);
  // `{ip:…}` → `ip:…`: the braces are a bucket's hash tag, not part of the name an operator reads.
  return tag === null ? null : tag.slice(1, -1);
}

/** The IP form of a ban key (what `per: ip` bans produce): refused on every route, not only the ban's. */
export function ipBanKey(ipKey: string): string {
  return `ip:${ipKey}`;
}

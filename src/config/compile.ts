/** @module Validated config → CompiledRules, matcher and the frozen Snapshot the request path reads. */
import { compileMatcher } from '../routing/matcher.js';
import { compileKey, NEED, paramPath } from '../keys/index.js';
import type { Config, LimitRule } from './schema.js';
import type { CompiledRule, RuleOverride, Snapshot } from './types.js';

/**
 * The rule's IETF `RateLimit-Policy` item. `w` is in whole seconds, rounded up so a sub-second or
 * fractional period never advertises a window shorter than the real one. Names need no escaping:
 * the schema limits them to characters that are plain inside a structured-field string.
 */
export function policyItem(name: string, limit: number, periodMs: number): string {
  return `"${name}";q=${limit};w=${Math.ceil(periodMs / 1000)}`;
}

/** What a rule needs from a request: its key's needs, `when`'s and its overrides'. */
function ruleNeeds(rule: LimitRule, keyNeeds: number): number {
  let needs = keyNeeds;
  if (rule.when?.authenticated !== undefined || rule.when?.account !== undefined) needs |= NEED.account;
  // Rack's params: the query merged with a form body (a GET's form body included).
  if (rule.when?.query !== undefined) needs |= NEED.query | NEED.form;
  if ((rule.overrides ?? []).some((o) => o.accounts.length > 0)) needs |= NEED.account;
  return needs;
}

/** `surge`: the surge whose rule this is (it counts only while the surge is on), or null for `limits:`. */
export function compileRule(rule: LimitRule, index: number, surge: string | null = null): CompiledRule {
  const key = compileKey(rule.per, rule.missing);
  const base = {
    index,
    name: rule.name,
    surge,
    key,
    whenAuthenticated: rule.when?.authenticated,
    whenAccount: rule.when?.account ? Object.freeze({ ...rule.when.account }) : null,
    whenQuery: rule.when?.query ? Object.freeze([...rule.when.query]) : null,
    whenQueryPaths: rule.when?.query
      ? Object.freeze(rule.when.query.map((q) => Object.freeze(paramPath(q) ?? [q])))
      : null,
    needs: ruleNeeds(rule, key.needs),
    limit: rule.limit,
    periodMs: rule.period,
    algorithm: rule.algorithm,
    cost: rule.cost,
    shadow: rule.shadow,
    onStoreError: rule.onStoreError,
    policyItem: policyItem(rule.name, rule.limit, rule.period),
    patterns: Object.freeze([...rule.match]),
  };
  const overrides: RuleOverride[] = (rule.overrides ?? []).map((o, j) => ({
    ips: o.ips,
    accounts: o.accounts,
    keys: o.keys,
    rule: Object.freeze({
      ...base,
      limit: o.limit,
      policyItem: policyItem(rule.name, o.limit, rule.period),
      overrides: [],
      overrideIndex: j,
    }),
  }));
  return Object.freeze({
    ...base,
    overrides: Object.freeze(overrides.map((o) => Object.freeze(o))),
    overrideIndex: -1,
  });
}

/** Freezes plain data all the way down, so no holder of a snapshot can change what others read. */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const key of Reflect.ownKeys(value)) deepFreeze((value as Record<PropertyKey, unknown>)[key]);
  }
  return value;
}

/** `config` must have passed validation (patterns are parsed again here and assumed valid). */
export function buildSnapshot(config: Config, source: string): Snapshot {
  const frozen = deepFreeze(config);
  // A surge's rules follow the table's, each marked with its surge: one index, one matcher, one reading.
  const surgeRules = frozen.surges.flatMap((s) => s.limits.map((r) => ({ r, surge: s.name })));
  const rules = Object.freeze([
    ...frozen.limits.map((r, i) => compileRule(r, i)),
    ...surgeRules.map(({ r, surge }, j) => compileRule(r, frozen.limits.length + j, surge)),
  ]);
  // The matcher keeps a private result cache, so it is frozen shallowly (its own method table only).
  return Object.freeze({ config: frozen, rules, matcher: compileMatcher(rules), source });
}

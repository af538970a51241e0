/** @module Validated config → CompiledRules, matcher and the frozen Snapshot the request path reads. */
import { compileMatcher } from '../routing/matcher.js';
import { paramPath } from './fields/limit-model.js';
import type { Config, LimitRule } from './schema.js';
import type { CompiledRule, Per, RuleOverride, Snapshot } from './types.js';

/**
 * The rule's IETF `RateLimit-Policy` item. `w` is in whole seconds, rounded up so a sub-second or
 * fractional period never advertises a window shorter than the real one. Names need no escaping:
 * the schema limits them to characters that are plain inside a structured-field string.
 */
export function policyItem(name: string, limit: number, periodMs: number): string {
  return `"${name}";q=${limit};w=${Math.ceil(periodMs / 1000)}`;
}

export function compileRule(rule: LimitRule, index: number): CompiledRule {
  const colon = rule.per.indexOf(':');
  const per = (colon < 0 ? rule.per : rule.per.slice(0, colon)) as Per;
  const name = colon < 0 ? '' : rule.per.slice(colon + 1);
  const whenAuthenticated = rule.when?.authenticated;
  const base = {
    index,
    name: rule.name,
    per,
    keyName: per === 'header' ? name.toLowerCase() : name,
    paramPath: per === 'param' ? Object.freeze(paramPath(name) ?? [name]) : null,
    whenAuthenticated,
    whenQuery: rule.when?.query ? Object.freeze([...rule.when.query]) : null,
    whenQueryPaths: rule.when?.query ? Object.freeze(rule.when.query.map((q) => Object.freeze(paramPath(q) ?? [q]))) : null,
    needsFacts:
      per === 'token' || per === 'header' || per === 'param' || per === 'cookie' || rule.when?.query !== undefined || (rule.overrides ?? []).length > 0,
    needsAccount: per === 'account' || whenAuthenticated !== undefined || (rule.overrides ?? []).some((o) => o.accounts.length > 0),
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
    rule: Object.freeze({ ...base, limit: o.limit, policyItem: policyItem(rule.name, o.limit, rule.period), overrides: [], overrideIndex: j }),
  }));
  return Object.freeze({ ...base, overrides: Object.freeze(overrides.map((o) => Object.freeze(o))), overrideIndex: -1 });
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
  const rules = Object.freeze(frozen.limits.map(compileRule));
  // The matcher keeps a private result cache, so it is frozen shallowly (its own method table only).
  return Object.freeze({ config: frozen, rules, matcher: compileMatcher(rules), source });
}

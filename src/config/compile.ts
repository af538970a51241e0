/** @module Validated config → CompiledRules, matcher and the frozen Snapshot the request path reads. */
import { compileMatcher } from '../routing/matcher.js';
import type { Config, LimitRule } from './schema.js';
import type { CompiledRule, Snapshot } from './types.js';

/**
 * The rule's IETF `RateLimit-Policy` item. `w` is in whole seconds, rounded up so a sub-second or
 * fractional period never advertises a window shorter than the real one. Names need no escaping:
 * the schema limits them to characters that are plain inside a structured-field string.
 */
export function policyItem(name: string, limit: number, periodMs: number): string {
  return `"${name}";q=${limit};w=${Math.ceil(periodMs / 1000)}`;
}

export function compileRule(rule: LimitRule, index: number): CompiledRule {
  return Object.freeze({
    index,
    name: rule.name,
    per: rule.per,
    limit: rule.limit,
    periodMs: rule.period,
    algorithm: rule.algorithm,
    cost: rule.cost,
    shadow: rule.shadow,
    onStoreError: rule.onStoreError,
    policyItem: policyItem(rule.name, rule.limit, rule.period),
    patterns: Object.freeze([...rule.match]),
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
  const rules = Object.freeze(frozen.limits.map(compileRule));
  // The matcher keeps a private result cache, so it is frozen shallowly (its own method table only).
  return Object.freeze({ config: frozen, rules, matcher: compileMatcher(rules), source });
}

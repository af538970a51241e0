/**
 * @module The introspection budget (issue 37): the unknown tokens one client may have the gateway ask
 * the upstream about per window. It is a bucket like any other, consumed through the Store (memory,
 * Redis, Redis Cluster alike: on a shared store every replica spends the same budget), under the
 * store's `onError`; past it, the request is answered 429 without an upstream call (spent by
 * spend-introspection.ts). Compiled here with the policy, apart from the stages that spend it.
 */
import { compileRule } from '../config/compile.js';
import { INTROSPECTION_BUDGET_RULE } from '../config/fields/rule.js';
import type { Config, LimitRule } from '../config/schema.js';
import type { CompiledRule } from '../config/types.js';
import { ruleKeyPrefix } from '../limiter/keys.js';
import type { BucketSpec } from '../limiter/types.js';

/** The budget of a snapshot: its rule (for the 429's headers and the log's rule name), compiled once. */
export interface IntrospectionBudget {
  readonly rule: CompiledRule;
  readonly rules: readonly CompiledRule[];
  readonly prefix: string;
  readonly onError: Config['store']['onError'];
  /** The last client's spec, reused while the same client comes again (as policy.ts `lastBuckets`). */
  last: BucketSpec | undefined;
}

/** The budget `clients.account.introspection.budget` asks for; null when nothing is introspected or the budget is off. */
export function compileIntrospectionBudget(cfg: Config): IntrospectionBudget | null {
  const budget = cfg.clients.account.introspection.budget;
  if (cfg.clients.account.from !== 'introspect' || budget === null) return null;
  // Per client as `per: ip` counts it (its resolved address behind a trusted proxy; IPv6 by network),
  // fixed windows: a budget's worth per aligned window, at most twice that across a window's edge.
  const asRule: LimitRule = {
    name: INTROSPECTION_BUDGET_RULE,
    match: ['/*'],
    per: 'ip',
    limit: budget.limit,
    period: budget.window,
    algorithm: 'fixed-window',
    cost: 1,
    shadow: false,
  };
  const rule = compileRule(asRule, -1);
  return {
    rule,
    rules: Object.freeze([rule]),
    prefix: ruleKeyPrefix(INTROSPECTION_BUDGET_RULE),
    onError: cfg.store.onError,
    last: undefined,
  };
}

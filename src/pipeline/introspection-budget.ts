/**
 * @module The introspection budget (issue 37): the unknown tokens one client may have the gateway ask
 * the upstream about per window. It is a bucket like any other, consumed through the Store (memory,
 * Redis, Redis Cluster alike: on a shared store every replica spends the same budget), under the
 * store's `onError`; past it, the request is answered 429 without an upstream call.
 */
import { compileRule } from '../config/compile.js';
import { INTROSPECTION_BUDGET_RULE } from '../config/fields/rule.js';
import type { Config, LimitRule } from '../config/schema.js';
import type { CompiledRule } from '../config/types.js';
import { bucketKey, ruleKeyPrefix } from '../limiter/keys.js';
import { StoreUnavailableError, type BucketSpec, type ConsumeOutcome } from '../limiter/types.js';
import { ERROR_BODIES } from '../http/errors.js';
import type { DecideContext } from './decide.js';
import { refusal, type Decision } from './decision.js';
import { rateLimited } from './rate-limited.js';
import type { RequestView } from './request-view.js';

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
  return { rule, rules: Object.freeze([rule]), prefix: ruleKeyPrefix(INTROSPECTION_BUDGET_RULE), onError: cfg.store.onError, last: undefined };
}

/**
 * Spends one introspection of the request's client: null when the budget had room (the caller then asks
 * the upstream), else the 429 (or a 503 under `onError: deny` with the store down). Called only when an
 * upstream call would follow (account.ts `introspects`): a cached or in-flight token spends nothing.
 */
export function spendIntrospection(ctx: DecideContext, v: RequestView, budget: IntrospectionBudget): Decision | null | Promise<Decision | null> {
  const specs = [specFor(budget, v)];
  const local = ctx.store.consumeLocal?.(specs);
  if (local !== undefined) return answer(ctx, v, budget, local);
  try {
    return ctx.store.consume(specs).then(
      (outcome) => answer(ctx, v, budget, outcome),
      (err: unknown) => unavailable(err, budget),
    );
  } catch (err) {
    return new Promise((resolve) => resolve(unavailable(err, budget)));
  }
}

function specFor(budget: IntrospectionBudget, v: RequestView): BucketSpec {
  const key = bucketKey(budget.prefix, budget.rule.key.tag(v)!);
  if (budget.last?.key === key) return budget.last;
  const { rule } = budget;
  const spec = { key, limit: rule.limit, periodMs: rule.periodMs, algorithm: rule.algorithm, cost: 1, shadow: false, onError: budget.onError };
  budget.last = spec;
  return spec;
}

function answer(ctx: DecideContext, v: RequestView, budget: IntrospectionBudget, outcome: ConsumeOutcome): Decision | null {
  if (outcome.allowed) return null;
  ctx.metrics.introspected('budget_exhausted');
  return rateLimited(v.policy, budget.rule, { rules: budget.rules, outcome });
}

/** The store could not decide and its onError said deny: the request is answered 503, as any other. */
function unavailable(err: unknown, budget: IntrospectionBudget): Decision {
  if (!(err instanceof StoreUnavailableError)) throw err;
  return { ...refusal(503, ERROR_BODIES.STORE_UNAVAILABLE, 'store_unavailable'), rules: budget.rules, matched: true };
}

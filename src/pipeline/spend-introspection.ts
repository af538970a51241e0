/**
 * @module Spending the introspection budget (introspection-budget.ts): one unknown token's upstream call
 * taken from the client's bucket, or the 429 that spares the upstream that call.
 */
import { bucketKey } from '../limiter/keys.js';
import { StoreUnavailableError, type BucketSpec, type ConsumeOutcome } from '../limiter/types.js';
import { ERROR_BODIES } from '../http/errors.js';
import type { DecideContext } from './context.js';
import { refusal, type Decision } from './decision.js';
import type { IntrospectionBudget } from './introspection-budget.js';
import { rateLimited } from './rate-limited.js';
import type { RequestView } from './request-view.js';
import { GO_ON, type Verdict } from './drive.js';

/**
 * Spends one introspection of the request's client: go on when the budget had room (the caller then asks
 * the upstream), else the 429 (or a 503 under `onError: deny` with the store down). Called only when an
 * upstream call would follow (account.ts `introspects`): a cached or in-flight token spends nothing.
 */
export function spendIntrospection(
  ctx: DecideContext,
  v: RequestView,
  budget: IntrospectionBudget,
): Verdict | Promise<Verdict> {
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
  const spec = {
    key,
    limit: rule.limit,
    periodMs: rule.periodMs,
    algorithm: rule.algorithm,
    cost: 1,
    shadow: false,
    onError: budget.onError,
  };
  budget.last = spec;
  return spec;
}

function answer(ctx: DecideContext, v: RequestView, budget: IntrospectionBudget, outcome: ConsumeOutcome): Verdict {
  if (outcome.allowed) return GO_ON;
  ctx.metrics.introspected('budget_exhausted');
  return rateLimited(v.policy, budget.rule, { rules: budget.rules, outcome });
}

/** The store could not decide and its onError said deny: the request is answered 503, as any other. */
function unavailable(err: unknown, budget: IntrospectionBudget): Decision {
  if (!(err instanceof StoreUnavailableError)) throw err;
  return { ...refusal(503, ERROR_BODIES.STORE_UNAVAILABLE, 'store_unavailable'), rules: budget.rules, matched: true };
}

/**
 * @module The limit decision for one request: the account when a rule needs it, the buckets of every
 * rule that counts it, consumed all-or-nothing, and the rate-limit headers of the answer. Plain requests
 * and WebSocket upgrades both come through here, so they are limited the same way. What needs no I/O
 * is answered as a value (no promise); the store and an introspection miss are the only waits.
 */
// The module's binding, not the global: globalThis.performance is a getter, called on every use.
import { performance } from 'node:perf_hooks';
import type { CompiledRule } from '../config/types.js';
import { StoreUnavailableError, type BucketSpec, type BucketState, type ConsumeOutcome } from '../limiter/types.js';
import type { Metrics } from '../observability/metrics.js';
import { ERROR_BODIES } from '../http/errors.js';
import { NEED, needs } from '../keys/index.js';
import { admitted, NO_HEADERS, NO_RULES, refusal, type Decision } from './decision.js';
import { rateLimited, rateLimitHeaders } from './rate-limited.js';
import { bucketsFor, isExemptAccount } from './policy.js';
import type { RequestView } from './request-view.js';
import { spendIntrospection } from './spend-introspection.js';
import type { DecideContext } from './context.js';
import type { Stage } from './drive.js';

export type { Decision, DecisionKind } from './decision.js';

const UNMATCHED: Decision = Object.freeze(admitted(NO_HEADERS, NO_RULES, false, 'unmatched'));
const EXEMPT: Decision = Object.freeze(admitted(NO_HEADERS, NO_RULES, true, 'exempt'));
const NO_BUCKET: Decision = Object.freeze(admitted(NO_HEADERS, NO_RULES, true, 'unmatched'));

export type { DecideContext } from './context.js';

/** The last stage: the limit decision, an answer either way (admitted with its headers, or the 429). */
export const limitStage: Stage = {
  name: 'limits',
  run: (ctx, s) => decide(ctx, s.view),
};

/** The limit decision for the request `v` describes (its rules matched and its parameters read by the stages before it). */
export function decide(ctx: DecideContext, v: RequestView): Decision | Promise<Decision> {
  const matched = v.rules.limits;
  if (matched.length === 0) return UNMATCHED;
  if (v.exempt(ctx.runtimeExempt)) return EXEMPT;
  if (!anyNeedsAccount(matched)) return charge(ctx, v);
  if (v.knownAccount() !== undefined) return withAccount(ctx, v);
  return beforeIntrospection(ctx, v).then((early) => early ?? lookUpAccount(ctx, v));
}

/**
 * Before the account is looked up (an upstream call on a cache miss), what needs no upstream: a request
 * the buckets known without the account already refuse (a flood with a fresh token each time) costs the
 * upstream nothing; then the client's introspection budget, spent only when a call would follow.
 * Null: go on and look the account up. Security (issue 37): cheap refusals first, DESIGN principle 14.
 */
export async function beforeIntrospection(ctx: DecideContext, v: RequestView): Promise<Decision | null> {
  const early = await refuseEarly(ctx, v);
  if (early !== null) return early;
  const budget = v.policy.introspectionBudget;
  if (budget === null || !v.policy.account.introspects(v.token, v)) return null;
  return spendIntrospection(ctx, v, budget);
}

async function lookUpAccount(ctx: DecideContext, v: RequestView): Promise<Decision> {
  await v.lookUpAccount();
  return withAccount(ctx, v);
}

function withAccount(ctx: DecideContext, v: RequestView): Decision | Promise<Decision> {
  if (v.account != null && isExemptAccount(v.policy, v.account)) return EXEMPT;
  return charge(ctx, v);
}

/** Charges every bucket of the request all-or-nothing; the answer's headers or the 429. */
function charge(ctx: DecideContext, v: RequestView): Decision | Promise<Decision> {
  const { specs, rules } = bucketsFor(v.policy, v.rules.limits, v, true, v.trace);
  if (specs.length === 0) return NO_BUCKET;
  return consume(ctx, v, specs, rules);
}

/** The store's synchronous answer when it has one (memory, a held lease, a blocked bucket): no promise hop. */
function consume(ctx: DecideContext, v: RequestView, specs: readonly BucketSpec[], rules: CompiledRule[]): Decision | Promise<Decision> {
  const storeStarted = performance.now();
  const local = ctx.store.consumeLocal?.(specs);
  if (local !== undefined) return decided(ctx, v, specs, rules, local, storeStarted);
  return consumeAsync(ctx, v, specs, rules, storeStarted);
}

/**
 * The store's promise and one reaction on it, not an async function: an await costs a frame suspended
 * and resumed besides the reaction. A store that throws rather than rejects is answered the same way.
 */
function consumeAsync(ctx: DecideContext, v: RequestView, specs: readonly BucketSpec[], rules: CompiledRule[], storeStarted: number): Promise<Decision> {
  const unavailable = (err: unknown): Decision => {
    if (!(err instanceof StoreUnavailableError)) throw err;
    return { ...refusal(503, ERROR_BODIES.STORE_UNAVAILABLE, 'store_unavailable'), rules, matched: true };
  };
  try {
    return ctx.store.consume(specs).then((outcome) => decided(ctx, v, specs, rules, outcome, storeStarted), unavailable);
  } catch (err) {
    return new Promise((resolve) => resolve(unavailable(err)));
  }
}

/** The store's outcome as the request's decision, whichever way it came. */
function decided(
  ctx: DecideContext,
  v: RequestView,
  specs: readonly BucketSpec[],
  rules: CompiledRule[],
  outcome: ConsumeOutcome,
  storeStarted: number,
): Decision {
  ctx.metrics.storeDuration.observe((performance.now() - storeStarted) / 1000);
  countDecision(ctx.metrics, rules, outcome);
  if (outcome.allowed) return admitted(rateLimitHeaders(v.policy, rules, outcome), rules, true, 'allowed', outcome);
  noteLimited(ctx, rules, specs, outcome);
  return rateLimited(v.policy, rejecting(rules, outcome), { rules, outcome });
}

/**
 * Reads, without charging, the buckets that need no account; a 429 when one of them has no room,
 * else null. Nothing is charged either way: the full, all-or-nothing consume comes after.
 */
async function refuseEarly(ctx: DecideContext, v: RequestView): Promise<Decision | null> {
  const { specs, rules } = bucketsFor(v.policy, v.rules.limits, v, false);
  if (specs.length === 0) return null;
  let buckets: BucketState[];
  try {
    buckets = await Promise.all(specs.map((spec) => ctx.store.peek(spec)));
  } catch {
    return null; // the store's trouble is the consume's to handle, with its onError policy
  }
  // Read through the store's layers (a peek the store could not answer is the fallback's, not told apart here).
  const outcome: ConsumeOutcome = { allowed: false, decider: 'store', now: ctx.now(), buckets };
  if (rejecting(rules, outcome) === undefined) return null;
  countDecision(ctx.metrics, rules, outcome);
  noteLimited(ctx, rules, specs, outcome);
  return rateLimited(v.policy, rejecting(rules, outcome), { rules, outcome });
}

/** The rejecting bucket, for triage (only on a 429: an allowed request costs nothing here). */
function noteLimited(ctx: DecideContext, rules: readonly CompiledRule[], specs: readonly { key: string }[], outcome: ConsumeOutcome): void {
  if (ctx.onLimited === undefined) return;
  for (let i = 0; i < rules.length; i++) {
    if (outcome.buckets[i]!.limited && !rules[i]!.shadow) return ctx.onLimited(rules[i]!.name, specs[i]!.key);
  }
}

function rejecting(rules: readonly CompiledRule[], outcome: ConsumeOutcome): CompiledRule | undefined {
  for (let i = 0; i < rules.length; i++) if (outcome.buckets[i]!.limited && !rules[i]!.shadow) return rules[i];
  return undefined;
}

function anyNeedsAccount(rules: readonly CompiledRule[]): boolean {
  for (let i = 0; i < rules.length; i++) if (needs(rules[i]!.needs, NEED.account)) return true;
  return false;
}

/**
 * Per rule: allowed, or limited for the rules that rejected, or shadow_limited for shadow rules that
 * would have. Rules of a rejected request that had room are not counted: they were not charged.
 */
function countDecision(metrics: Metrics, rules: readonly CompiledRule[], outcome: ConsumeOutcome): void {
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i]!;
    const b = outcome.buckets[i]!;
    const c = metrics.forRule(rule.name);
    if (b.limited) {
      if (rule.shadow) c.shadowLimited++;
      else c.limited++;
    } else if (outcome.allowed) {
      c.allowed++;
      if (b.remaining <= rule.limit * 0.2) c.nearLimit++;
    }
  }
}

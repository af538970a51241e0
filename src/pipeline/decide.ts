/**
 * @module The limit decision for one request: the account when a rule needs it, the buckets of every
 * rule that counts it, consumed all-or-nothing, and the rate-limit headers of the answer. Plain requests
 * and WebSocket upgrades both come through here, so they are limited the same way. What needs no I/O
 * is answered as a value (no promise); the store and an introspection miss are the only waits.
 */
// The module's binding, not the global: globalThis.performance is a getter, called on every use.
import { performance } from 'node:perf_hooks';
import type { CompiledRule } from '../config/types.js';
import { StoreUnavailableError, type ConsumeOutcome } from '../limiter/types.js';
import type { Metrics } from '../observability/metrics.js';
import { ERROR_BODIES } from '../http/errors.js';
import { NEED, needs } from '../keys/index.js';
import { admitted, NO_HEADERS, NO_RULES, refusal, type Decision } from './decision.js';
import { rateLimited, rateLimitHeaders } from './rate-limited.js';
import { bucketsFor, isExemptAccount, rememberRefused, type Buckets } from './policy.js';
import type { RequestView } from './request-view.js';
import { spendIntrospection } from './spend-introspection.js';
import type { DecideContext } from './context.js';
import { GO_ON, verdictOf, type Stage, type Verdict } from './drive.js';
import { Screening, type Ending } from './screening.js';

export type { Decision, DecisionKind } from './decision.js';

const UNMATCHED: Decision = Object.freeze(admitted(NO_HEADERS, NO_RULES, false, 'unmatched'));
const EXEMPT: Decision = Object.freeze(admitted(NO_HEADERS, NO_RULES, true, 'exempt'));
const NO_BUCKET: Decision = Object.freeze(admitted(NO_HEADERS, NO_RULES, true, 'unmatched'));

export type { DecideContext } from './context.js';

/**
 * Before the account is looked up (an upstream call on a cache miss), what needs no upstream: a request
 * the buckets known without the account already refuse (a flood with a fresh token each time) costs the
 * upstream nothing; then the client's introspection budget, spent only when a call would follow; then
 * the lookup. Run by the driver as steps (drive.ts verdictOf) wherever a stage needs the account: a
 * flood refused locally is answered with no promise. Security (issue 37): cheap refusals first, DESIGN
 * principle 14.
 */
// Plain arrays, read-only by type: a frozen one's elements load through the generic stub (screen.ts STAGES).
export const ACCOUNT_STEPS: readonly Stage[] = [
  { name: 'early-refusal', run: (ctx, s) => refuseEarly(ctx, s.view) },
  { name: 'introspection-budget', run: (ctx, s) => spendBudget(ctx, s.view) },
  { name: 'account-lookup', run: (_ctx, s) => s.view.lookUpAccount().then(() => GO_ON) },
] satisfies Stage[];

/** The account a limit rule of the route needs, when it is not known without I/O (ACCOUNT_STEPS). */
export const limitAccountStage: Stage = {
  name: 'limits-account',
  run: (ctx, s) => (lookUpFor(ctx, s.view) ? verdictOf(ACCOUNT_STEPS, 0, ctx, s) : GO_ON),
};

/** The last stage: the limit decision, an answer either way (admitted with its headers, or the 429). */
export const limitStage: Stage = {
  name: 'limits',
  run: (ctx, s) => decideKnown(ctx, s.view),
};

/** Both limit stages in order, for callers that decide a request whose stages before them have run. */
export const LIMIT_STAGES: readonly Stage[] = [limitAccountStage, limitStage];

/** Who hears nothing: decide() reads the verdict itself. */
const NO_ENDING: Ending = { screened: () => {}, failed: () => {}, held: () => {} };

/** The limit decision for the request `v` describes (its rules matched and its parameters read by the stages before it). */
export function decide(ctx: DecideContext, v: RequestView): Decision | Promise<Decision> {
  // The last stage always answers: its verdict is a decision.
  return verdictOf(LIMIT_STAGES, 0, ctx, new Screening(v, null, undefined, NO_ENDING)) as Decision | Promise<Decision>;
}

/** Whether the limit rules need an account not yet known (not for an exempt client or an unmatched route). */
function lookUpFor(ctx: DecideContext, v: RequestView): boolean {
  const matched = v.rules.limits;
  return (
    matched.length > 0 && anyNeedsAccount(matched) && v.knownAccount() === undefined && !v.exempt(ctx.runtimeExempt)
  );
}

/** The decision once the account is known (or not needed). */
function decideKnown(ctx: DecideContext, v: RequestView): Decision | Promise<Decision> {
  const matched = v.rules.limits;
  if (matched.length === 0) return UNMATCHED;
  if (v.exempt(ctx.runtimeExempt)) return EXEMPT;
  if (!anyNeedsAccount(matched)) return charge(ctx, v);
  return withAccount(ctx, v);
}

/** The client's introspection budget, spent only when an upstream call would follow. */
function spendBudget(ctx: DecideContext, v: RequestView): Verdict | Promise<Verdict> {
  const budget = v.policy.introspectionBudget;
  if (budget === null || !v.policy.account.introspects(v.token, v)) return GO_ON;
  return spendIntrospection(ctx, v, budget);
}

function withAccount(ctx: DecideContext, v: RequestView): Decision | Promise<Decision> {
  if (v.account != null && isExemptAccount(v.policy, v.account)) return EXEMPT;
  return charge(ctx, v);
}

/** Charges every bucket of the request all-or-nothing; the answer's headers or the 429. */
function charge(ctx: DecideContext, v: RequestView): Decision | Promise<Decision> {
  const b = bucketsFor(v.policy, v.rules.limits, v, true, v.trace);
  if (b.specs.length === 0) return NO_BUCKET;
  return consume(ctx, v, b);
}

/** The store's synchronous answer when it has one (memory, a held lease, a blocked bucket): no promise hop. */
function consume(ctx: DecideContext, v: RequestView, b: Buckets): Decision | Promise<Decision> {
  const storeStarted = performance.now();
  const local = ctx.store.consumeLocal?.(b.specs);
  if (local !== undefined) return decided(ctx, v, b, local, storeStarted);
  return consumeAsync(ctx, v, b, storeStarted);
}

/**
 * The store's promise and one reaction on it, not an async function: an await costs a frame suspended
 * and resumed besides the reaction. A store that throws rather than rejects is answered the same way.
 */
function consumeAsync(ctx: DecideContext, v: RequestView, b: Buckets, storeStarted: number): Promise<Decision> {
  const { specs, rules } = b;
  const unavailable = (err: unknown): Decision => {
    if (v.span !== null) v.span.stored('consume', storeStarted, performance.now(), specs.length, null, err);
    if (!(err instanceof StoreUnavailableError)) throw err;
    return { ...refusal(503, ERROR_BODIES.STORE_UNAVAILABLE, 'store_unavailable'), rules, matched: true };
  };
  try {
    return ctx.store.consume(specs).then((outcome) => decided(ctx, v, b, outcome, storeStarted), unavailable);
  } catch (err) {
    return new Promise((resolve) => resolve(unavailable(err)));
  }
}

/** The store's outcome as the request's decision, whichever way it came. */
function decided(
  ctx: DecideContext,
  v: RequestView,
  b: Buckets,
  outcome: ConsumeOutcome,
  storeStarted: number,
): Decision {
  const { specs, rules } = b;
  const storeEnded = performance.now();
  ctx.metrics.storeDuration.observe((storeEnded - storeStarted) / 1000);
  if (v.span !== null) v.span.stored('consume', storeStarted, storeEnded, specs.length, outcome);
  countDecision(ctx.metrics, rules, outcome);
  if (outcome.allowed) return admitted(rateLimitHeaders(v.policy, rules, outcome), rules, true, 'allowed', outcome);
  noteLimited(ctx, rules, specs, outcome);
  rememberRefused(v.policy, b);
  return rateLimited(v.policy, rejecting(rules, outcome), { rules, outcome });
}

/**
 * Reads, without charging, the buckets that need no account; a 429 when one of them has no room,
 * else go on. Nothing is charged either way: the full, all-or-nothing consume comes after. A value when
 * the store reads without I/O (the memory store; a bucket the blocked cache holds): a flood refused
 * this way costs no promise and no store call.
 */
function refuseEarly(ctx: DecideContext, v: RequestView): Verdict | Promise<Verdict> {
  const b = bucketsFor(v.policy, v.rules.limits, v, false);
  const { specs } = b;
  if (specs.length === 0) return GO_ON;
  const store = ctx.store;
  const started = v.span !== null ? performance.now() : 0;
  const local = store.readLocal?.(specs);
  if (local !== undefined) {
    if (v.span !== null) v.span.stored('peek', started, performance.now(), specs.length, null);
    return refusedByRead(ctx, v, b, local);
  }
  // Read through the store's layers (a read the store could not answer is the fallback's, not told apart here).
  let read: Promise<ConsumeOutcome>;
  try {
    read =
      store.read !== undefined
        ? store.read(specs)
        : Promise.all(specs.map((spec) => store.peek(spec))).then((buckets): ConsumeOutcome => ({
            allowed: false,
            decider: 'store',
            now: ctx.now(),
            buckets,
          }));
  } catch {
    return GO_ON;
  }
  return read.then(
    (outcome) => {
      if (v.span !== null) v.span.stored('peek', started, performance.now(), specs.length, null);
      return refusedByRead(ctx, v, b, outcome);
    },
    (err: unknown) => {
      if (v.span !== null) v.span.stored('peek', started, performance.now(), specs.length, null, err);
      return GO_ON; // the store's trouble is the consume's to handle, with its onError policy
    },
  );
}

/** The early 429 when a bucket read has no room, else go on. */
function refusedByRead(ctx: DecideContext, v: RequestView, b: Buckets, outcome: ConsumeOutcome): Verdict {
  const { specs, rules } = b;
  const by = rejecting(rules, outcome);
  if (by === undefined) return GO_ON;
  countDecision(ctx.metrics, rules, outcome);
  noteLimited(ctx, rules, specs, outcome);
  rememberRefused(v.policy, b);
  return rateLimited(v.policy, by, { rules, outcome });
}

/** The rejecting bucket, for triage (only on a 429: an allowed request costs nothing here). */
function noteLimited(
  ctx: DecideContext,
  rules: readonly CompiledRule[],
  specs: readonly { key: string }[],
  outcome: ConsumeOutcome,
): void {
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

/**
 * @module The limit decision for one request: the account when a rule needs it, the buckets of every
 * rule that counts it, consumed all-or-nothing, and the rate-limit headers of the answer. Plain requests
 * and WebSocket upgrades both come through here, so they are limited the same way. What needs no I/O
 * is answered as a value (no promise); the store and an introspection miss are the only waits.
 */
// The module's binding, not the global: globalThis.performance is a getter, called on every use.
import { performance } from 'node:perf_hooks';
import type { CompiledRule } from '../config/types.js';
import { StoreUnavailableError, type BucketSpec, type ConsumeOutcome, type Store } from '../limiter/types.js';
import type { Metrics } from '../observability/metrics.js';
import { ERROR_BODIES } from '../http/errors.js';
import { NEED, needs } from '../keys/index.js';
import { admitted, NO_HEADERS, NO_RULES, refusal, type Decision } from './decision.js';
import { rateLimited, rateLimitHeaders } from './rate-limited.js';
import { bucketsFor, isExemptAccount } from './policy.js';
import type { RequestView } from './request-view.js';
import { spendIntrospection } from './introspection-budget.js';

export type { Decision, DecisionKind } from './decision.js';

const UNMATCHED: Decision = Object.freeze(admitted(NO_HEADERS, NO_RULES, false, 'unmatched'));
const EXEMPT: Decision = Object.freeze(admitted(NO_HEADERS, NO_RULES, true, 'exempt'));
const NO_BUCKET: Decision = Object.freeze(admitted(NO_HEADERS, NO_RULES, true, 'unmatched'));

/** What the decision needs besides the request: the store, the metrics, and the store's clock. */
export interface DecideContext {
  readonly store: Store;
  readonly metrics: Metrics;
  /** Epoch ms; the store's clock as near as the gateway knows it (for an early refusal's headers). */
  readonly now: () => number;
  /** Runtime exemptions (the admin API's), beside `exempt.ips`. */
  readonly runtimeExempt?: ((address: string) => boolean) | undefined;
  /** Told the rule and bucket key of each request limited (the triage sketch). */
  readonly onLimited?: ((rule: string, bucketKey: string) => void) | undefined;
}

/** The limit decision for the request `v` describes (its rules matched and its parameters read by screen()). */
export function decide(ctx: DecideContext, v: RequestView): Decision | Promise<Decision> {
  const matched = v.rules.limits;
  if (matched.length === 0) return UNMATCHED;
  if (v.exempt(ctx.runtimeExempt)) return EXEMPT;
  if (!anyNeedsAccount(matched)) return charge(ctx, v);
  if (v.knownAccount() !== undefined) return withAccount(ctx, v);
  const early = earlyOrBudget(ctx, v);
  if (!(early instanceof Promise)) return early ?? lookUpAccount(ctx, v);
  return early.then((d) => d ?? lookUpAccount(ctx, v));
}

/**
 * Before the account is looked up (an upstream call on a cache miss), what needs no upstream: a request
 * the buckets known without the account already refuse (a flood with a fresh token each time) costs the
 * upstream nothing; then the client's introspection budget, spent only when a call would follow.
 * Null: go on and look the account up. Security (issue 37): cheap refusals first, DESIGN principle 14.
 */
export function beforeIntrospection(ctx: DecideContext, v: RequestView): Promise<Decision | null> {
  const early = earlyOrBudget(ctx, v);
  return early instanceof Promise ? early : Promise.resolve(early);
}

/** beforeIntrospection's answer, as a value when no store call was needed (a flood refused locally). */
function earlyOrBudget(ctx: DecideContext, v: RequestView): Decision | null | Promise<Decision | null> {
  const early = refuseEarly(ctx, v);
  if (early instanceof Promise) return early.then((d) => d ?? spendBudget(ctx, v));
  return early ?? spendBudget(ctx, v);
}

/** The client's introspection budget, spent only when an upstream call would follow. */
function spendBudget(ctx: DecideContext, v: RequestView): Decision | null | Promise<Decision | null> {
  const budget = v.policy.introspectionBudget;
  if (budget === null || !v.policy.account.introspects(v.token, v)) return null;
  return spendIntrospection(ctx, v, budget);
}

function lookUpAccount(ctx: DecideContext, v: RequestView): Decision | Promise<Decision> {
  const account = v.resolveAccount();
  return account instanceof Promise ? account.then(() => withAccount(ctx, v)) : withAccount(ctx, v);
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
    if (v.span !== null) v.span.stored('consume', storeStarted, performance.now(), specs.length, null, err);
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
  const storeEnded = performance.now();
  ctx.metrics.storeDuration.observe((storeEnded - storeStarted) / 1000);
  if (v.span !== null) v.span.stored('consume', storeStarted, storeEnded, specs.length, outcome);
  countDecision(ctx.metrics, rules, outcome);
  if (outcome.allowed) return admitted(rateLimitHeaders(v.policy, rules, outcome), rules, true, 'allowed', outcome);
  noteLimited(ctx, rules, specs, outcome);
  return rateLimited(v.policy, rejecting(rules, outcome), { rules, outcome });
}

/**
 * Reads, without charging, the buckets that need no account; a 429 when one of them has no room,
 * else null. Nothing is charged either way: the full, all-or-nothing consume comes after. A value when
 * the store reads without I/O (the memory store; a bucket the blocked cache holds): a flood refused
 * this way costs no promise and no store call.
 */
function refuseEarly(ctx: DecideContext, v: RequestView): Decision | null | Promise<Decision | null> {
  const { specs, rules } = bucketsFor(v.policy, v.rules.limits, v, false);
  if (specs.length === 0) return null;
  const store = ctx.store;
  const started = v.span !== null ? performance.now() : 0;
  const local = store.readLocal?.(specs);
  if (local !== undefined) {
    if (v.span !== null) v.span.stored('peek', started, performance.now(), specs.length, null);
    return refusedByRead(ctx, v, specs, rules, local);
  }
  // Read through the store's layers (a read the store could not answer is the fallback's, not told apart here).
  let read: Promise<ConsumeOutcome>;
  try {
    read =
      store.read !== undefined
        ? store.read(specs)
        : Promise.all(specs.map((spec) => store.peek(spec))).then((buckets): ConsumeOutcome => ({ allowed: false, decider: 'store', now: ctx.now(), buckets }));
  } catch {
    return null;
  }
  return read.then(
    (outcome) => {
      if (v.span !== null) v.span.stored('peek', started, performance.now(), specs.length, null);
      return refusedByRead(ctx, v, specs, rules, outcome);
    },
    (err: unknown) => {
      if (v.span !== null) v.span.stored('peek', started, performance.now(), specs.length, null, err);
      return null; // the store's trouble is the consume's to handle, with its onError policy
    },
  );
}

/** The early 429 when a bucket read has no room, else null. */
function refusedByRead(ctx: DecideContext, v: RequestView, specs: readonly BucketSpec[], rules: CompiledRule[], outcome: ConsumeOutcome): Decision | null {
  const by = rejecting(rules, outcome);
  if (by === undefined) return null;
  countDecision(ctx.metrics, rules, outcome);
  noteLimited(ctx, rules, specs, outcome);
  return rateLimited(v.policy, by, { rules, outcome });
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

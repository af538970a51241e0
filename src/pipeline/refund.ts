/**
 * @module A request refused after its decision (the upstream pool's per-client cap or its wait for a
 * connection) charges nothing (SPEC §3.4): its buckets get their charge back (the Store contract's
 * refund), and its answer says so. Runs on the refusal branch only; the forwarded path never comes here.
 */
import type { BucketSpec, BucketState, ConsumeOutcome, Store } from '../limiter/types.js';
import type { PoolRefusal } from '../proxy/forward.js';
import { NO_HEADERS } from './decision.js';
import { bucketsFor } from './policy.js';
import { rateLimitHeaders } from './rate-limited.js';
import type { Screened } from './screen.js';

/**
 * Gives the buckets of `s`'s admitted decision back, once (the exchange reports its refusal once, and a
 * client leaving after it changes nothing), and returns the headers of the pool's answer. The 429 of the
 * per-client cap is an in-flight limit's: `Retry-After: 1` and no bucket's figures, which had room and
 * did not refuse it. The 503 of the wait carries the buckets' headers as they stand after the refund.
 * Bounded: one refund per bucket of the request, on the store's timeout, for a request that was charged.
 */
export function refundRefused(store: Store, s: Screened, code: PoolRefusal): readonly string[] {
  const d = s.decision;
  const outcome = d.outcome;
  if (d.kind !== 'allowed' || outcome === undefined || !outcome.allowed || store.refund === undefined)
    return code === 'TOO_MANY_IN_FLIGHT' ? NO_HEADERS : d.headers;
  const specs = chargedSpecs(s);
  if (specs === null) return code === 'TOO_MANY_IN_FLIGHT' ? NO_HEADERS : d.headers;
  // Never rejects (the contract); a failed refund leaves the charge standing: fewer admissions, never more.
  void store.refund(specs, outcome);
  return code === 'TOO_MANY_IN_FLIGHT'
    ? NO_HEADERS
    : rateLimitHeaders(s.view.policy, d.rules, refunded(specs, outcome));
}

/**
 * The buckets the decision charged, built again from the same view and snapshot (the decision keeps
 * only its rules and outcome, so the forwarded path carries nothing more); null when they are no
 * longer the same rules (a surge switched meanwhile): then nothing is given back.
 */
function chargedSpecs(s: Screened): readonly BucketSpec[] | null {
  const v = s.view;
  const { specs, rules } = bucketsFor(v.policy, v.rules.limits, v, true);
  const charged = s.decision.rules;
  if (rules.length !== charged.length) return null;
  for (let i = 0; i < rules.length; i++) if (rules[i] !== charged[i]) return null;
  return specs;
}

/** The outcome as the buckets stand after the refund: each charged bucket has its cost back. */
function refunded(specs: readonly BucketSpec[], outcome: ConsumeOutcome): ConsumeOutcome {
  const buckets: BucketState[] = new Array(specs.length);
  for (let i = 0; i < specs.length; i++) {
    const b = outcome.buckets[i]!;
    buckets[i] = b.limited ? b : { ...b, remaining: Math.min(specs[i]!.limit, b.remaining + specs[i]!.cost) };
  }
  return { ...outcome, buckets };
}

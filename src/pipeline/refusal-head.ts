/**
 * @module The 429's head kept from one refusal to the next while nothing in it can differ. A flood on an
 * exhausted bucket (the blocked cache answering every request the same) would otherwise build the same
 * values, and the same flat array for `writeHead`, on every request.
 *
 * The head is a function of the policy (the reset format, the IETF fields, the body's length), the rules
 * charged in their order, each bucket's state and the clock: remaining and limited of every bucket, the
 * reset time of every bucket, the retry time of a limited one (a bucket with room reports `now` as its
 * retry time, which no header shows). The clock enters only through whole seconds: Retry-After, each
 * RateLimit `t=`, and a `delta` reset are all ceil((time − now) / 1000) of a time in the buckets, clamped
 * once that time is past (so a bucket reported full, reset `now`, shows 0 whatever its exact reset). So
 * the head is kept with the interval of `now` in which every one of those values stays what it was, and
 * reused when the inputs compare equal and `now` is inside it. One slot (the last refusal): a hot key hits it; refusals of many clients interleaved
 * miss it and cost the comparison (a few number compares per bucket) besides the build.
 */
import type { CompiledRule } from '../config/types.js';
import type { BucketState, ConsumeOutcome } from '../limiter/types.js';
import { jsonHead } from '../http/errors.js';
import { appendRateLimitHeaders, type ResetFormat } from './ratelimit-headers.js';
import type { RequestPolicy } from './policy.js';

/** A refusal's headers: the rate-limit ones (what a decision carries) and the whole head `writeHead` takes. */
export interface RefusalHead {
  /** The rate-limit headers, flat name/value pairs. */
  readonly headers: readonly string[];
  /** Content-Type, Content-Length of the 429 body, then `headers`: written as is. */
  readonly head: readonly string[];
}

interface Kept extends RefusalHead {
  readonly policy: RequestPolicy;
  readonly rules: readonly CompiledRule[];
  /** Copies of the states the head was built from (the outcome's own objects may be reused by a store). */
  readonly states: readonly BucketState[];
  /** `now` from which and until which (exclusive) every clock-derived value is unchanged. */
  readonly from: number;
  readonly until: number;
}

let kept: Kept | null = null;

/** The 429's head for these rules and outcome: the last one when nothing in it can differ, else built (and kept). */
export function refusalHead(
  policy: RequestPolicy,
  rules: readonly CompiledRule[],
  outcome: ConsumeOutcome,
): RefusalHead {
  const now = outcome.now;
  const k = kept;
  if (k !== null && now >= k.from && now < k.until && k.policy === policy && sameInputs(k, rules, outcome.buckets, now))
    return k;
  const headers: string[] = [];
  const responses = policy.snapshot.config.responses;
  appendRateLimitHeaders(headers, rules, outcome, responses.reset as ResetFormat, responses.standardHeaders);
  const states: BucketState[] = new Array(outcome.buckets.length);
  let until = Infinity;
  for (let i = 0; i < outcome.buckets.length; i++) {
    const b = outcome.buckets[i]!;
    states[i] = { remaining: b.remaining, limited: b.limited, resetAt: b.resetAt, retryAt: b.retryAt };
    until = Math.min(until, sameSecondsUntil(b.resetAt, now), b.limited ? sameSecondsUntil(b.retryAt, now) : Infinity);
  }
  const built: Kept = {
    policy,
    rules: rules.slice(),
    states,
    from: now,
    until,
    headers,
    head: jsonHead(policy.limitedBody, headers),
  };
  kept = built;
  return built;
}

/** Whether the head built from `k` is the one these inputs would build at `now` (inside `k`'s interval). */
function sameInputs(k: Kept, rules: readonly CompiledRule[], buckets: readonly BucketState[], now: number): boolean {
  if (k.rules.length !== rules.length || buckets.length !== rules.length) return false;
  for (let i = 0; i < rules.length; i++) {
    const a = k.states[i]!;
    const b = buckets[i]!;
    if (k.rules[i] !== rules[i] || a.remaining !== b.remaining || a.limited !== b.limited) return false;
    // A limited bucket may head the answer: its exact times are shown. Another shows only its seconds to reset.
    if (a.limited) {
      if (a.resetAt !== b.resetAt || a.retryAt !== b.retryAt) return false;
    } else if (a.resetAt !== b.resetAt && !(a.resetAt <= now && b.resetAt <= now)) return false;
  }
  return true;
}

/**
 * The first `now` (after `now`) at which ceil((at − now) / 1000) changes. With v = that value, it holds
 * for `now` in [at − 1000·v, at − 1000·(v − 1)); once `at` is reached every value derived from it is
 * clamped (0, or 1 for Retry-After) and stays so.
 */
export function sameSecondsUntil(at: number, now: number): number {
  if (at <= now) return Infinity;
  const v = Math.ceil((at - now) / 1000);
  return at - 1000 * (v - 1);
}

/** Forgets the kept head (tests). */
export function forgetRefusalHead(): void {
  kept = null;
}

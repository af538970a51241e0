/**
 * @module The three limiting algorithms as pure functions of (bucket, stored state, now).
 *
 * State is three integers `[a, b, c]` so that the memory store and the Redis Lua scripts hold the same
 * thing and compute the same results with the same integer arithmetic (doubles on both sides are exact
 * below 2^53). The Lua scripts in `lua/` mirror this file line for line; the contract suite proves it.
 *
 *   fixed-window   [windowStart ms, count, 0]
 *   sliding-window [windowStart ms, count in that window, count in the window before]
 *   token-bucket   [theoretical arrival time µs (GCRA), 0, 0]
 */
import type { BucketSpec } from './types.js';

export type State = readonly [number, number, number];

/**
 * What weighing a bucket finds, written in place by `evaluate`: a caller keeps one per bucket it weighs,
 * so a decision allocates nothing (a fresh object, its `next` tuple and the boxed epoch times were
 * ~260 B per bucket, the memory store's largest allocation per request).
 */
export class Evaluation {
  /** The bucket has room for this request's cost. */
  ok = false;
  /** State to store when the request is charged (only meaningful when ok): `[nextA, nextB, nextC]`. */
  nextA = 0;
  nextB = 0;
  nextC = 0;
  /** When the next state stops mattering: the store may forget the bucket after this (epoch ms). */
  expireAt = 0;
  /** Remaining after charging (when ok) or as things stand (when not ok: then 0 is reported). */
  remainingIfCharged = 0;
  remainingNow = 0;
  /** Full-replenishment time if charged, and as things stand. */
  resetIfCharged = 0;
  resetNow = 0;
  /** When a request of this cost would be admitted (epoch ms); `now` when ok. */
  retryAt = 0;

  /** Sets every field, in the order they are declared; returns this. */
  set(
    ok: boolean,
    a: number,
    b: number,
    c: number,
    expireAt: number,
    remainingIfCharged: number,
    remainingNow: number,
    resetIfCharged: number,
    resetNow: number,
    retryAt: number,
  ): this {
    this.ok = ok;
    this.nextA = a;
    this.nextB = b;
    this.nextC = c;
    this.expireAt = expireAt;
    this.remainingIfCharged = remainingIfCharged;
    this.remainingNow = remainingNow;
    this.resetIfCharged = resetIfCharged;
    this.resetNow = resetNow;
    this.retryAt = retryAt;
    return this;
  }
}

const EMPTY: State = [0, 0, 0];

/** Weighs `spec` over its stored state into `out` (returned). */
export function evaluate(spec: BucketSpec, state: State | undefined, now: number, out: Evaluation): Evaluation {
  switch (spec.algorithm) {
    case 'fixed-window':
      return fixedWindow(spec, state ?? EMPTY, now, out);
    case 'sliding-window':
      return slidingWindow(spec, state ?? EMPTY, now, out);
    case 'token-bucket':
      return tokenBucket(spec, state ?? EMPTY, now, out);
  }
}

/** Mastodon's algorithm: epoch-aligned windows, count includes this request, N allowed per window. */
function fixedWindow(spec: BucketSpec, [storedStart, storedCount]: State, now: number, out: Evaluation): Evaluation {
  const P = spec.periodMs;
  const start = now - (now % P);
  const count = storedStart === start ? storedCount : 0;
  const after = count + spec.cost;
  const end = start + P;
  const ok = after <= spec.limit;
  return out.set(
    ok,
    start,
    after,
    0,
    end,
    Math.max(0, spec.limit - after),
    Math.max(0, spec.limit - count),
    end,
    count > 0 ? end : now,
    ok ? now : end,
  );
}

/**
 * Two-window weighted counter: count = current + previous × (unelapsed fraction of the current window).
 * Compared scaled by P so that everything stays an integer: current·P + previous·(P − elapsed) ≤ limit·P.
 */
function slidingWindow(
  spec: BucketSpec,
  [storedStart, storedCur, storedPrev]: State,
  now: number,
  out: Evaluation,
): Evaluation {
  const P = spec.periodMs;
  const L = spec.limit;
  const cost = spec.cost;
  const start = now - (now % P);
  let cur = 0;
  let prev = 0;
  if (storedStart === start) {
    cur = storedCur;
    prev = storedPrev;
  } else if (storedStart === start - P) {
    prev = storedCur;
  }
  const unelapsed = P - (now - start);
  const scaled = cur * P + prev * unelapsed;
  const scaledAfter = scaled + cost * P;
  const ok = scaledAfter <= L * P;

  let retryAt = now;
  if (!ok) {
    // Within this window the previous count decays: prev·(P − e) ≤ (L − cur − cost)·P.
    const room = (L - cur - cost) * P;
    if (room >= 0 && prev > 0) {
      retryAt = start + P - Math.floor(room / prev);
    } else {
      // Next window: this window's count becomes the decaying one: cur·(P − e') ≤ (L − cost)·P.
      const nextRoom = (L - cost) * P;
      retryAt = cur === 0 ? start + P : start + P + Math.max(0, P - Math.floor(nextRoom / cur));
    }
  }
  const end = start + P;
  const remainingIfCharged = Math.max(0, Math.floor((L * P - scaledAfter) / P));
  const remainingNow = Math.max(0, Math.floor((L * P - scaled) / P));
  // Fully replenished when no count still carries weight: this window's count weighs until end + P.
  return out.set(
    ok,
    start,
    cur + cost,
    prev,
    end + P,
    remainingIfCharged,
    remainingNow,
    end + P,
    cur > 0 ? end + P : prev > 0 ? end : now,
    retryAt,
  );
}

/**
 * GCRA: one timestamp (theoretical arrival time) per bucket, in integer microseconds. Capacity `limit`,
 * refilled continuously at limit/period; a request is admitted when tat' − now ≤ limit·T.
 */
function tokenBucket(spec: BucketSpec, [storedTat]: State, now: number, out: Evaluation): Evaluation {
  const T = emissionIntervalUs(spec);
  const burst = T * spec.limit;
  const nowUs = now * 1000;
  const tat = Math.max(storedTat, nowUs);
  const tatAfter = tat + spec.cost * T;
  const ok = tatAfter - nowUs <= burst;
  const remainingIfCharged = Math.max(0, Math.floor((burst - (tatAfter - nowUs)) / T));
  const remainingNow = Math.max(0, Math.floor((burst - (tat - nowUs)) / T));
  const resetIfCharged = Math.ceil(tatAfter / 1000);
  return out.set(
    ok,
    tatAfter,
    0,
    0,
    resetIfCharged,
    remainingIfCharged,
    remainingNow,
    resetIfCharged,
    Math.ceil(tat / 1000),
    ok ? now : Math.ceil((tatAfter - burst) / 1000),
  );
}

/** Microseconds per token; at least 1 so that absurd limits cannot divide by zero. */
export function emissionIntervalUs(spec: BucketSpec): number {
  return Math.max(1, Math.round((spec.periodMs * 1000) / spec.limit));
}

/**
 * The state after giving back the `cost` a request charged at `chargedAt` (epoch ms), as refund.lua
 * computes it (keep both in step): a window's count loses the cost while the window that holds it (a
 * sliding window's, through the next window too) is still the stored one; a token bucket's TAT loses
 * cost·T less the refill since the charge, so never more than the charge still weighs. Writes the state
 * and its expiry into `out` ([a, b, c, expireAt]); false when nothing is given back.
 */
export function refundedState(
  spec: BucketSpec,
  [a, b, c]: State,
  chargedAt: number,
  now: number,
  out: number[],
): boolean {
  const P = spec.periodMs;
  const cost = spec.cost;
  switch (spec.algorithm) {
    case 'fixed-window':
      if (a !== chargedAt - (chargedAt % P) || b < cost) return false;
      return setState(out, a, b - cost, c, a + P);
    case 'sliding-window': {
      const start = chargedAt - (chargedAt % P);
      if (a === start && b >= cost) return setState(out, a, b - cost, c, a + 2 * P);
      if (a === start + P && c >= cost) return setState(out, a, b, c - cost, a + 2 * P);
      return false;
    }
    case 'token-bucket': {
      const give = cost * emissionIntervalUs(spec) - (now - chargedAt) * 1000;
      if (a <= 0 || give <= 0) return false;
      return setState(out, a - give, 0, 0, Math.ceil((a - give) / 1000));
    }
  }
}

function setState(out: number[], a: number, b: number, c: number, expireAt: number): true {
  out[0] = a;
  out[1] = b;
  out[2] = c;
  out[3] = expireAt;
  return true;
}

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

export interface Evaluation {
  /** The bucket has room for this request's cost. */
  readonly ok: boolean;
  /** State to store when the request is charged (only meaningful when ok). */
  readonly next: State;
  /** When `next` stops mattering: the store may forget the bucket after this (epoch ms). */
  readonly expireAt: number;
  /** Remaining after charging (when ok) or as things stand (when not ok: then 0 is reported). */
  readonly remainingIfCharged: number;
  readonly remainingNow: number;
  /** Full-replenishment time if charged, and as things stand. */
  readonly resetIfCharged: number;
  readonly resetNow: number;
  /** When a request of this cost would be admitted (epoch ms); `now` when ok. */
  readonly retryAt: number;
}

const EMPTY: State = [0, 0, 0];

export function evaluate(spec: BucketSpec, state: State | undefined, now: number): Evaluation {
  switch (spec.algorithm) {
    case 'fixed-window':
      return fixedWindow(spec, state ?? EMPTY, now);
    case 'sliding-window':
      return slidingWindow(spec, state ?? EMPTY, now);
    case 'token-bucket':
      return tokenBucket(spec, state ?? EMPTY, now);
  }
}

/** Mastodon's algorithm: epoch-aligned windows, count includes this request, N allowed per window. */
function fixedWindow(spec: BucketSpec, [storedStart, storedCount]: State, now: number): Evaluation {
  const P = spec.periodMs;
  const start = now - (now % P);
  const count = storedStart === start ? storedCount : 0;
  const after = count + spec.cost;
  const end = start + P;
  const ok = after <= spec.limit;
  return {
    ok,
    next: [start, after, 0],
    expireAt: end,
    remainingIfCharged: Math.max(0, spec.limit - after),
    remainingNow: Math.max(0, spec.limit - count),
    resetIfCharged: end,
    resetNow: count > 0 ? end : now,
    retryAt: ok ? now : end,
  };
}

/**
 * Two-window weighted counter: count = current + previous × (unelapsed fraction of the current window).
 * Compared scaled by P so that everything stays an integer: current·P + previous·(P − elapsed) ≤ limit·P.
 */
function slidingWindow(spec: BucketSpec, [storedStart, storedCur, storedPrev]: State, now: number): Evaluation {
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
  return {
    ok,
    next: [start, cur + cost, prev],
    expireAt: end + P,
    remainingIfCharged: Math.max(0, Math.floor((L * P - scaledAfter) / P)),
    remainingNow: Math.max(0, Math.floor((L * P - scaled) / P)),
    // Fully replenished when no count still carries weight: this window's count weighs until end + P.
    resetIfCharged: end + P,
    resetNow: cur > 0 ? end + P : prev > 0 ? end : now,
    retryAt,
  };
}

/**
 * GCRA: one timestamp (theoretical arrival time) per bucket, in integer microseconds. Capacity `limit`,
 * refilled continuously at limit/period; a request is admitted when tat' − now ≤ limit·T.
 */
function tokenBucket(spec: BucketSpec, [storedTat]: State, now: number): Evaluation {
  const T = emissionIntervalUs(spec);
  const burst = T * spec.limit;
  const nowUs = now * 1000;
  const tat = Math.max(storedTat, nowUs);
  const tatAfter = tat + spec.cost * T;
  const ok = tatAfter - nowUs <= burst;
  return {
    ok,
    next: [tatAfter, 0, 0],
    expireAt: Math.ceil(tatAfter / 1000),
    remainingIfCharged: Math.max(0, Math.floor((burst - (tatAfter - nowUs)) / T)),
    remainingNow: Math.max(0, Math.floor((burst - (tat - nowUs)) / T)),
    resetIfCharged: Math.ceil(tatAfter / 1000),
    resetNow: Math.ceil(tat / 1000),
    retryAt: ok ? now : Math.ceil((tatAfter - burst) / 1000),
  };
}

/** Microseconds per token; at least 1 so that absurd limits cannot divide by zero. */
export function emissionIntervalUs(spec: BucketSpec): number {
  return Math.max(1, Math.round((spec.periodMs * 1000) / spec.limit));
}

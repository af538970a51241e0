/**
 * @module The rate-limit response headers: the X-RateLimit-* triple of the bucket closest to exhaustion
 * (Mastodon's choice), Retry-After on a 429, and the IETF RateLimit / RateLimit-Policy fields for all.
 */
import type { CompiledRule } from '../config/types.js';
import type { ConsumeOutcome } from '../limiter/types.js';
import { secondsUntil } from '../http/message.js';

export type ResetFormat = 'iso8601' | 'unix' | 'delta';

/** The bucket the X-RateLimit-* triple describes, or -1 when none may be shown (only shadow buckets). */
export function headlineBucket(rules: readonly CompiledRule[], outcome: ConsumeOutcome): number {
  let best = -1;
  if (!outcome.allowed) {
    // The request waits for the bucket that frees up last; ties go to the rule listed first.
    for (let i = 0; i < rules.length; i++) {
      const b = outcome.buckets[i]!;
      if (rules[i]!.shadow || !b.limited) continue;
      if (best < 0 || b.retryAt > outcome.buckets[best]!.retryAt) best = i;
    }
    return best;
  }
  for (let i = 0; i < rules.length; i++) {
    // Shadow rules are a dry run for operators; showing them would tell clients of limits not enforced.
    if (rules[i]!.shadow) continue;
    if (best < 0 || outcome.buckets[i]!.remaining < outcome.buckets[best]!.remaining) best = i;
  }
  return best;
}

let lastIsoMs = NaN;
let lastIso = '';

/** Mastodon's format: ISO 8601 UTC with exactly six fractional digits, e.g. 2026-11-21T19:30:00.000000Z. */
export function iso8601Micro(ms: number): string {
  // Most requests of a window share one reset time: keep the last one formatted.
  if (ms !== lastIsoMs) {
    lastIsoMs = ms;
    const s = new Date(ms).toISOString();
    lastIso = `${s.slice(0, -1)}000Z`;
  }
  return lastIso;
}

export function formatReset(format: ResetFormat, resetAt: number, now: number): string {
  switch (format) {
    case 'iso8601':
      return iso8601Micro(resetAt);
    case 'unix':
      return String(Math.ceil(resetAt / 1000));
    case 'delta':
      return String(Math.max(0, Math.ceil((resetAt - now) / 1000)));
  }
}

/**
 * Appends the rate-limit headers as flat [name, value, …] pairs to `out` (the form `writeHead` takes).
 * `rules[i]` is the rule of `outcome.buckets[i]`.
 */
export function appendRateLimitHeaders(
  out: string[],
  rules: readonly CompiledRule[],
  outcome: ConsumeOutcome,
  format: ResetFormat,
  standardHeaders: boolean,
): void {
  const head = headlineBucket(rules, outcome);
  if (head < 0) return;
  const rule = rules[head]!;
  const bucket = outcome.buckets[head]!;
  const now = outcome.now;
  out.push(
    'X-RateLimit-Limit',
    String(rule.limit),
    'X-RateLimit-Remaining',
    outcome.allowed ? String(bucket.remaining) : '0',
    'X-RateLimit-Reset',
    formatReset(format, bucket.resetAt, now),
  );
  if (!outcome.allowed) out.push('Retry-After', String(secondsUntil(bucket.retryAt, now)));
  if (!standardHeaders) return;

  const n = orderByRemaining(rules, outcome);
  let state = '';
  for (let k = 0; k < n; k++) {
    const i = order[k]!;
    const b = outcome.buckets[i]!;
    const t = Math.max(0, Math.ceil((b.resetAt - now) / 1000));
    state += (k === 0 ? '"' : ', "') + rules[i]!.name + '";r=' + (b.limited ? 0 : b.remaining) + ';t=' + t;
  }
  out.push('RateLimit-Policy', policyValue(rules, n), 'RateLimit', state);
}

/** The non-shadow buckets' indexes, closest to exhaustion first (`order[0..n)`); reused: each call runs to completion. */
const order: number[] = [];

/**
 * Closest to exhaustion first, as the IETF draft's examples list them; ties keep table order. An
 * insertion sort in place: a request matches a handful of rules, and Array#sort with a comparator (or a
 * fresh array and splice) allocated more per request than everything else here. Returns the count.
 */
function orderByRemaining(rules: readonly CompiledRule[], outcome: ConsumeOutcome): number {
  let n = 0;
  for (let i = 0; i < rules.length; i++) {
    if (rules[i]!.shadow) continue;
    const remaining = outcome.buckets[i]!.remaining;
    let at = n++;
    while (at > 0 && outcome.buckets[order[at - 1]!]!.remaining > remaining) {
      order[at] = order[at - 1]!;
      at--;
    }
    order[at] = i;
  }
  return n;
}

/** The last RateLimit-Policy value and its rules in order: a request of the same rule set (and order) reuses it. */
let policyRules: CompiledRule[] = [];
let policyLast = '';

/** RateLimit-Policy for `order[0..n)`: built only when the rules listed (or their order) differ from the last request's. */
function policyValue(rules: readonly CompiledRule[], n: number): string {
  let same = n === policyRules.length;
  for (let k = 0; same && k < n; k++) same = policyRules[k] === rules[order[k]!];
  if (same) return policyLast;
  const listed: CompiledRule[] = new Array(n);
  let value = '';
  for (let k = 0; k < n; k++) {
    listed[k] = rules[order[k]!]!;
    value += (k === 0 ? '' : ', ') + listed[k]!.policyItem;
  }
  policyRules = listed;
  policyLast = value;
  return value;
}

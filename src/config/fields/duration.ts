/** @module Durations as written in the config (`30s`, `5m`, `1h30m`, `250ms`, `1500`) ↔ milliseconds. */

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
type Unit = keyof typeof UNIT_MS;

/** A whole duration: plain digits (milliseconds) or one or more `<digits><unit>` parts. */
export const DURATION_PATTERN = '^(?:[0-9]+|(?:[0-9]+(?:ms|s|m|h|d))+)$';
const DURATION_RE = new RegExp(DURATION_PATTERN);
const PART_RE = /([0-9]+)(ms|s|m|h|d)/g;

export const DURATION_HINT = 'use 30s, 5m, 1h, 1d, 250ms or milliseconds';

/** Milliseconds, or undefined when `value` is not a duration or does not fit a safe integer. */
export function parseDuration(value: unknown): number | undefined {
  if (typeof value === 'number') {
    return Number.isSafeInteger(value) && value >= 0 ? value : undefined;
  }
  if (typeof value !== 'string' || !DURATION_RE.test(value)) return undefined;
  if (/^[0-9]+$/.test(value)) {
    const ms = Number(value);
    return Number.isSafeInteger(ms) ? ms : undefined;
  }
  let total = 0;
  for (const m of value.matchAll(PART_RE)) {
    total += Number(m[1]) * UNIT_MS[m[2] as Unit];
  }
  return Number.isSafeInteger(total) ? total : undefined;
}

/** The shortest exact spelling, largest units first: 1800000 → `30m`, 5400000 → `1h30m`, 0 → `0ms`. */
export function formatDuration(ms: number): string {
  if (!Number.isSafeInteger(ms) || ms < 0) return `${ms}ms`;
  if (ms === 0) return '0ms';
  let rest = ms;
  let out = '';
  for (const unit of ['d', 'h', 'm', 's', 'ms'] as const) {
    const size = UNIT_MS[unit];
    const n = Math.floor(rest / size);
    if (n > 0) {
      out += `${n}${unit}`;
      rest -= n * size;
    }
  }
  return out;
}

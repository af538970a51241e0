/**
 * @module nginx's timestamps as epoch ms: `$time_local` (`10/Oct/2000:13:55:36 -0700`), `$time_iso8601`
 * and `$msec`. A log has many lines per second, so the last string read is remembered.
 */

const MONTHS: Record<string, number> = {
  Jan: 0,
  Feb: 1,
  Mar: 2,
  Apr: 3,
  May: 4,
  Jun: 5,
  Jul: 6,
  Aug: 7,
  Sep: 8,
  Oct: 9,
  Nov: 10,
  Dec: 11,
};

let lastLocal = '';
let lastLocalMs = NaN;

/** `$time_local` as epoch ms, or NaN. */
export function parseTimeLocal(s: string): number {
  if (s === lastLocal) return lastLocalMs;
  const ms = readTimeLocal(s);
  lastLocal = s;
  lastLocalMs = ms;
  return ms;
}

function readTimeLocal(s: string): number {
  // dd/Mon/yyyy:hh:mm:ss +zzzz
  if (s.length !== 26 || s[2] !== '/' || s[6] !== '/' || s[11] !== ':' || s[20] !== ' ') return NaN;
  const month = MONTHS[s.slice(3, 6)];
  if (month === undefined) return NaN;
  const n = (from: number, to: number) => Number(s.slice(from, to));
  const sign = s[21] === '-' ? -1 : s[21] === '+' ? 1 : NaN;
  const offsetMin = sign * (n(22, 24) * 60 + n(24, 26));
  const day = n(0, 2);
  const h = n(12, 14);
  const m = n(15, 17);
  const sec = n(18, 20);
  // Date.UTC would roll 99/Nov over into February: out of range is unreadable.
  if (!(day >= 1 && day <= 31 && h < 24 && m < 60 && sec < 61)) return NaN;
  const utc = Date.UTC(n(7, 11), month, day, h, m, sec);
  return utc - offsetMin * 60_000;
}

let lastIso = '';
let lastIsoMs = NaN;

/** An ISO 8601 time (`$time_iso8601`, JSON logs) as epoch ms, or NaN. */
export function parseIsoTime(s: string): number {
  if (s === lastIso) return lastIsoMs;
  lastIso = s;
  lastIsoMs = /^\d{4}-\d\d-\d\dT\d\d:\d\d/.test(s) ? Date.parse(s) : NaN;
  return lastIsoMs;
}

/** A time as JSON logs write it: epoch seconds or ms as a number or a digit string, or ISO 8601. */
export function parseAnyTime(v: unknown): number {
  if (typeof v === 'number') return v < 1e11 ? v * 1000 : v;
  if (typeof v !== 'string') return NaN;
  if (/^\d+(\.\d+)?$/.test(v)) return parseAnyTime(Number(v));
  const local = parseTimeLocal(v);
  return Number.isNaN(local) ? parseIsoTime(v) : local;
}

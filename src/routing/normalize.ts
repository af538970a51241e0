/** @module Request-target normalization (SPEC §4.1): one canonical path is both matched and forwarded. */

export type NormalizeResult =
  | { readonly ok: true; readonly path: string; /** Including the leading `?`, or `''`. */ readonly query: string }
  | { readonly ok: false; readonly reason: string };

// The characters the scans below compare against, by their char codes (computed once, at load).
const SLASH = '/'.charCodeAt(0);
const DOT = '.'.charCodeAt(0);
const PERCENT = '%'.charCodeAt(0);
const BACKSLASH = '\\'.charCodeAt(0);
const HASH = '#'.charCodeAt(0);
const QUESTION = '?'.charCodeAt(0);

/** The reasons are stable strings: the server puts them in the 400 body and tests assert them. */
export const REJECT = Object.freeze({
  notOrigin: 'request target must start with "/"',
  dotSegment: 'path contains a "." or ".." segment',
  encodedSlash: 'path contains an encoded "/" (%2F)',
  encodedBackslash: 'path contains an encoded "\\" (%5C)',
  backslash: 'path contains a "\\"',
  nul: 'path contains a NUL character',
  malformedEscape: 'path contains a malformed percent-escape',
  control: 'request target contains a control character or whitespace',
  nonAscii: 'path contains a non-ASCII character (percent-encode it)',
  fragment: 'path contains a "#" (fragments are not sent to servers)',
});

// Unreserved characters (RFC 3986 §2.3) are the only ones whose escapes may be decoded without
// changing what the upstream sees: every other escape may be meaningful to it (e.g. %3F, %25).
const UNRESERVED = new Uint8Array(128);
for (let c = 0; c < 128; c++) {
  const ch = String.fromCharCode(c);
  if (/[A-Za-z0-9\-._~]/.test(ch)) UNRESERVED[c] = 1;
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  return -1;
}

const HEX = '0123456789ABCDEF';

/**
 * Normalizes an origin-form request target. Anything ambiguous is rejected rather than guessed at,
 * because an upstream that resolved it differently would route a request counted as another
 * (e.g. `/api/v1/x/../accounts` counted as `/api/v1/x/..` but served as sign-up).
 */
export function normalizePath(rawTarget: string): NormalizeResult {
  const fast = fastPath(rawTarget);
  if (fast !== undefined) return fast;
  return slowPath(rawTarget);
}

/**
 * The common case (`/api/v1/statuses/123?x=1`) is already normal: one scan, no allocation beyond
 * the two slices. Returns undefined whenever anything might need work; the slow path decides.
 */
function fastPath(target: string): NormalizeResult | undefined {
  if (target.charCodeAt(0) !== SLASH) return undefined;
  const n = target.length;
  let prev = SLASH;
  let i = 1;
  for (; i < n; i++) {
    const c = target.charCodeAt(i);
    if (c === QUESTION) break;
    if (c <= 0x20 || c >= 0x7f || c === PERCENT || c === BACKSLASH || c === HASH) return undefined;
    // A segment starting with a dot might be a dot segment: let the slow path look closely.
    if (prev === SLASH && (c === SLASH || c === DOT)) return undefined;
    prev = c;
  }
  if (prev === SLASH && i > 1) return undefined; // trailing slash
  if (i === n) return { ok: true, path: target, query: '' };
  const query = target.slice(i);
  if (hasControl(query)) return undefined;
  return { ok: true, path: target.slice(0, i), query };
}

function hasControl(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return true;
  }
  return false;
}

function slowPath(target: string): NormalizeResult {
  if (target.charCodeAt(0) !== SLASH) return { ok: false, reason: REJECT.notOrigin };
  const q = target.indexOf('?');
  const raw = q < 0 ? target : target.slice(0, q);
  const query = q < 0 ? '' : target.slice(q);
  // The query is forwarded untouched, but a control character in it is never legitimate.
  if (hasControl(query)) return { ok: false, reason: REJECT.control };

  let out = '';
  let start = 1;
  while (start <= raw.length) {
    let end = raw.indexOf('/', start);
    if (end < 0) end = raw.length;
    if (end > start) {
      const seg = normalizeSegment(raw, start, end);
      if (typeof seg !== 'string') return seg;
      // Checked after decoding, so `%2e%2E` is caught like `..`.
      if (seg === '.' || seg === '..') return { ok: false, reason: REJECT.dotSegment };
      out += '/' + seg;
    }
    start = end + 1;
  }
  return { ok: true, path: out === '' ? '/' : out, query };
}

function normalizeSegment(s: string, start: number, end: number): string | { ok: false; reason: string } {
  let out = '';
  for (let i = start; i < end; i++) {
    const c = s.charCodeAt(i);
    if (c === PERCENT) {
      // Fewer than two characters left in this segment: `%`, `%4`, and `%2/` (the `/` splits).
      if (i + 2 >= end) {
        return { ok: false, reason: REJECT.malformedEscape };
      }
      const hi = hexValue(s.charCodeAt(i + 1));
      const lo = hexValue(s.charCodeAt(i + 2));
      if (hi < 0 || lo < 0) return { ok: false, reason: REJECT.malformedEscape };
      const v = hi * 16 + lo;
      if (v === 0) return { ok: false, reason: REJECT.nul };
      if (v === SLASH) return { ok: false, reason: REJECT.encodedSlash };
      if (v === BACKSLASH) return { ok: false, reason: REJECT.encodedBackslash };
      if (v < 128 && UNRESERVED[v] === 1) out += String.fromCharCode(v);
      else out += '%' + HEX.charAt(hi) + HEX.charAt(lo);
      i += 2;
      continue;
    }
    if (c === 0) return { ok: false, reason: REJECT.nul };
    if (c === BACKSLASH) return { ok: false, reason: REJECT.backslash };
    if (c === HASH) return { ok: false, reason: REJECT.fragment };
    if (c <= 0x20 || c === 0x7f) return { ok: false, reason: REJECT.control };
    // Node's parser already refuses raw non-ASCII bytes; refusing here keeps callers that bypass it
    // (tests, the upgrade path) from producing a path the upstream would decode differently.
    if (c > 0x7f) return { ok: false, reason: REJECT.nonAscii };
    out += s.charAt(i);
  }
  return out;
}

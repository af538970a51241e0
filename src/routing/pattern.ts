/** @module Parsing of `match:` patterns (`METHOD /path`, `/path`) into segments the matcher compiles. */
import { normalizePath } from './normalize.js';

export type Segment =
  | { readonly kind: 'literal'; readonly value: string }
  | { readonly kind: 'param'; readonly name: string }
  /** A final `*`: the rest of the path, zero or more segments. */
  | { readonly kind: 'rest' };

export interface ParsedPattern {
  /** The pattern as written. */
  readonly source: string;
  /** Uppercase method, or null for any method. */
  readonly method: string | null;
  readonly segments: readonly Segment[];
  /** Ends in Rails' `(.:format)`: the last segment also matches with any `.ext` appended. */
  readonly format: boolean;
}

/** Rails' optional format suffix, allowed only at the very end of a pattern. */
export const FORMAT_SUFFIX = '(.:format)';

export type PatternResult =
  { readonly ok: true; readonly pattern: ParsedPattern } | { readonly ok: false; readonly error: string };

// RFC 7230 `token`, restricted to uppercase: Node hands methods over as written on the wire, and
// every registered method is uppercase, so `get` in a config is a typo that would never match.
const METHOD = /^[A-Z0-9!#$%&'*+.^_`|~-]+$/;
const PARAM_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Parses one pattern; on error returns a message meant to follow `limits[i].match: `. */
export function parsePattern(source: string): PatternResult {
  const fail = (error: string): PatternResult => ({ ok: false, error });
  const text = source.trim();
  if (text === '') return fail('empty pattern (write "METHOD /path" or "/path")');
  const parts = text.split(/\s+/);
  let method: string | null = null;
  let path: string;
  if (parts.length === 1) {
    path = parts[0] ?? '';
  } else if (parts.length === 2) {
    const m = parts[0] ?? '';
    path = parts[1] ?? '';
    if (!METHOD.test(m)) {
      if (METHOD.test(m.toUpperCase())) return fail(`method "${m}" must be uppercase ("${m.toUpperCase()}")`);
      return fail(`invalid method "${m}"`);
    }
    method = m;
  } else {
    return fail(`expected "METHOD /path" or "/path", got "${text}"`);
  }
  if (!path.startsWith('/')) {
    return fail(
      parts.length === 1 && METHOD.test(path)
        ? `"${path}" has no path (write "${path} /path")`
        : `path must start with "/", got "${path}"`,
    );
  }
  if (path.includes('?')) return fail(`a pattern matches paths only, not a query string: "${path}"`);
  const format = path.endsWith(FORMAT_SUFFIX);
  if (format) path = path.slice(0, -FORMAT_SUFFIX.length);
  if (path.includes(FORMAT_SUFFIX))
    return fail(`"${FORMAT_SUFFIX}" is only allowed at the end of a pattern, in "${parts[parts.length - 1]}"`);
  if (path.includes('(') || path.includes(')')) {
    return fail(`optional parts are not supported except a final "${FORMAT_SUFFIX}", in "${parts[parts.length - 1]}"`);
  }
  if (format && (path === '/' || path.endsWith('/') || path.endsWith('/*'))) {
    return fail(`"${FORMAT_SUFFIX}" must follow a literal or :name segment, in "${parts[parts.length - 1]}"`);
  }

  const segments = parseSegments(path);
  if (typeof segments === 'string') return fail(segments);
  return { ok: true, pattern: { source, method, segments, format } };
}

/** The segments of a pattern's path (after its method and `(.:format)`), or what is wrong with one. */
function parseSegments(path: string): Segment[] | string {
  const raw = path.slice(1).split('/');
  const segments: Segment[] = [];
  for (let i = 0; i < raw.length; i++) {
    const seg = raw[i] ?? '';
    const last = i === raw.length - 1;
    if (seg === '') {
      if (raw.length === 1) break; // the pattern `/`
      // Request paths are normalized before matching, so this segment could never match.
      return `empty segment in "${path}" (request paths have no "//" or trailing "/")`;
    }
    if (seg === '*') {
      if (!last) return `"*" is only allowed as the last segment, in "${path}"`;
      segments.push({ kind: 'rest' });
      continue;
    }
    if (seg.includes('*')) return `"*" must be a whole segment, in "${path}"`;
    if (seg.startsWith(':')) {
      const name = seg.slice(1);
      if (name === '') return `empty parameter name ":" in "${path}"`;
      if (!PARAM_NAME.test(name)) {
        return `invalid parameter name ":${name}" in "${path}" (letters, digits and _, not starting with a digit)`;
      }
      segments.push({ kind: 'param', name });
      continue;
    }
    // Literals are compared with normalized request paths, so normalize them the same way:
    // `%61pi` means `api`, and a segment the normalizer rejects could never match.
    const norm = normalizePath('/' + seg);
    if (!norm.ok) return `invalid segment "${seg}" in "${path}": ${norm.reason}`;
    if (norm.path === '/' || norm.path.indexOf('/', 1) >= 0) {
      return `invalid segment "${seg}" in "${path}"`;
    }
    segments.push({ kind: 'literal', value: norm.path.slice(1) });
  }
  return segments;
}

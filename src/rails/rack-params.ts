/**
 * @module Rack's request-parameter tree, shared by the gateway's body peek and the built-in upstream:
 * `a[b][]=c` keys, form pairs, JSON bodies, and looking a bracket name up in the tree.
 */
import { RategateError } from '../errors.js';

export type ParamScalar = string | number | boolean | null;
export type ParamValue = ParamScalar | ParamValue[] | ParamHash;
/** Always created with a null prototype, so no key a client sends can reach `Object.prototype`. */
export interface ParamHash {
  [key: string]: ParamValue;
}

/**
 * A parameter set Rails would refuse: 400 (type conflict, too deep, bad JSON) or 413 (too many). The
 * built-in upstream answers with it; the gateway's body peek reports it as malformed.
 */
export class ParamError extends RategateError {
  readonly code = 'PARAM_INVALID';
  constructor(
    readonly status: 400 | 413,
    message: string,
  ) {
    super(message);
  }
}

/** Rack's default nesting limit; deeper keys are refused rather than recursed into. */
export const MAX_DEPTH = 32;
/** More pairs than any route of this API takes; refuses hash-flooding bodies cheaply. */
export const MAX_PARAMS = 1000;

/** Keys that would reach a prototype if the tree were ever copied into a plain object. */
const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

export function newHash(): ParamHash {
  return Object.create(null) as ParamHash;
}

export function isHash(v: ParamValue | undefined): v is ParamHash {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Splits `a[b][]` into `['a', 'b', '']`, where `''` stands for "append to an array". A key whose
 * brackets do not close is one literal name, as Rack reads it. Returns undefined for an empty name.
 */
export function parseKey(key: string): string[] | undefined {
  if (key === '') return undefined;
  // Rack does not treat a bracket in the first position as nesting.
  const open = key.indexOf('[', 1);
  if (open === -1) return [key];
  const segments = [key.slice(0, open)];
  let i = open;
  while (i < key.length) {
    if (key[i] !== '[') return [key];
    const close = key.indexOf(']', i + 1);
    if (close === -1) return [key];
    const inner = key.slice(i + 1, close);
    if (inner.includes('[')) return [key];
    segments.push(inner);
    i = close + 1;
  }
  return segments;
}

/**
 * How Rack 2.2's `normalize_params` nests a name (`''` for an array step); undefined when it drops the
 * pair. Looser than Rack 3 (parseKey): leading brackets are skipped, so `[access_token]` and
 * `]access_token` are `access_token` to Rack 2. Used only to find names the two read differently.
 */
export function rack2Path(name: string): string[] | undefined {
  const out: string[] = [];
  let rest = name;
  for (let depth = 0; depth <= MAX_DEPTH; depth++) {
    const m = /^[[\]]*([^[\]]+)\]*/.exec(rest);
    if (m === null) return out.length === 0 ? undefined : out; // an empty key: Rack 2 drops (or stops) here
    const k = m[1]!;
    const after = rest.slice(m[0].length);
    if (after === '') return [...out, k];
    if (after === '[') return [...out, rest];
    if (after === '[]') return [...out, k, ''];
    const child = /^\[\]\[([^[\]]+)\]$/.exec(after) ?? /^\[\](.+)$/.exec(after);
    if (child !== null) {
      out.push(k, '');
      rest = child[1]!;
    } else {
      out.push(k);
      rest = after;
    }
  }
  return undefined;
}

/** Whether Rack 2 and Rack 3 nest `name` the same way. */
export function sameInRack2And3(name: string): boolean {
  const a = rack2Path(name);
  const b = parseKey(name);
  if (a === undefined || b === undefined) return a === b;
  return a.length === b.length && a.every((seg, i) => seg === b[i]);
}

export function kindOf(v: ParamValue): string {
  if (v === null) return 'Null';
  if (Array.isArray(v)) return 'Array';
  if (typeof v === 'object') return 'Hash';
  return typeof v === 'string' ? 'String' : typeof v === 'number' ? 'Number' : 'Boolean';
}

function conflict(expected: string, got: ParamValue, key: string): ParamError {
  // Rack raises ParameterTypeError here and Rails answers 400.
  return new ParamError(400, `expected ${expected} (got ${kindOf(got)}) for param \`${key}'`);
}

/** Whether `path` (hash keys, `''` for arrays) already leads to a value inside `h`. */
function hasPath(h: ParamHash, path: readonly string[]): boolean {
  const [head, ...rest] = path;
  if (head === undefined || head === '') return false;
  if (!(head in h)) return false;
  if (rest.length === 0 || rest[0] === '') return true;
  const next = h[head];
  return isHash(next) ? hasPath(next, rest) : false;
}

function build(path: readonly string[], value: ParamValue): ParamValue {
  const [head, ...rest] = path;
  if (head === undefined) return value;
  if (head === '') return [build(rest, value)];
  const h = newHash();
  h[head] = build(rest, value);
  return h;
}

/** Sets `value` at `path` inside `root` with Rack's rules; `key` is the name as sent, for errors. */
export function assign(root: ParamHash, path: readonly string[], value: ParamValue, key: string): void {
  const [head, ...rest] = path;
  if (head === undefined) return;
  if (rest.length === 0) {
    root[head] = value;
    return;
  }
  if (rest[0] === '') {
    let arr = root[head];
    if (arr === undefined) root[head] = arr = [];
    else if (!Array.isArray(arr)) throw conflict('Array', arr, key);
    const child = rest.slice(1);
    if (child.length === 0) {
      arr.push(value);
      return;
    }
    // `a[][x]=1&a[][y]=2` builds one hash; a repeated `x` starts the next one.
    const last = arr[arr.length - 1];
    if (child[0] !== '' && isHash(last) && !hasPath(last, child)) assign(last, child, value, key);
    else arr.push(build(child, value));
    return;
  }
  let sub = root[head];
  if (sub === undefined) root[head] = sub = newHash();
  else if (!isHash(sub)) throw conflict('Hash', sub, key);
  assign(sub, rest, value, key);
}

/** Builds the tree from name/value pairs in order (later scalars win, `[]` appends). */
export function pairsToHash(pairs: Iterable<readonly [string, string]>, into: ParamHash = newHash()): ParamHash {
  let count = 0;
  for (const [key, value] of pairs) {
    if (++count > MAX_PARAMS) throw new ParamError(413, `Too many parameters (maximum is ${MAX_PARAMS})`);
    const path = parseKey(key);
    if (path === undefined) continue;
    if (path.length > MAX_DEPTH) throw new ParamError(400, `Parameter nesting too deep: ${key.slice(0, 64)}`);
    // Dropped, not refused: nothing legitimate is named so, and refusing would tell a prober too much.
    if (path.some((segment) => FORBIDDEN_KEYS.has(segment))) continue;
    assign(into, path, value, key);
  }
  return into;
}

/** `+` is a space; a broken escape stays as written (Rails answers such a request 400 anyway). */
function decodeComponent(s: string): string {
  const spaced = s.includes('+') ? s.replace(/\+/g, ' ') : s;
  if (!spaced.includes('%')) return spaced;
  try {
    return decodeURIComponent(spaced);
  } catch {
    return spaced;
  }
}

/**
 * The name/value pairs of a query string or URL-encoded body, split as Rails 8's query parser splits
 * them: on `&` and `;` (or, with `semicolon` false, on `&` only, as Rack 3.1 splits a form body), with
 * spaces right after a separator dropped (`a=1&  b=2` has a `b`). Security: the gateway must find the
 * same names the upstream finds, or a client hides a token from it.
 */
export function formPairs(text: string, semicolon = true): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  const n = text.length;
  let i = 0;
  while (i < n) {
    let end = i;
    while (end < n && text.charCodeAt(end) !== 0x26 /* & */ && (!semicolon || text.charCodeAt(end) !== 0x3b) /* ; */)
      end++;
    if (end > i) {
      const piece = text.slice(i, end);
      const eq = piece.indexOf('=');
      out.push(
        eq === -1
          ? [decodeComponent(piece), '']
          : [decodeComponent(piece.slice(0, eq)), decodeComponent(piece.slice(eq + 1))],
      );
    }
    i = end + 1;
    while (i < n && text.charCodeAt(i) === 0x20) i++;
  }
  return out;
}

/** Parses `a=1&b[]=2` (query strings and URL-encoded bodies; `+` is a space). */
export function parseUrlEncoded(text: string, into: ParamHash = newHash(), semicolon = true): ParamHash {
  return pairsToHash(formPairs(text, semicolon), into);
}

/**
 * Turns parsed JSON into the same tree a form gives: null-prototype hashes, forbidden keys dropped,
 * nesting bounded. The top level must be an object, as every route of this API takes named params.
 */
export function fromJson(value: unknown): ParamHash {
  if (!isPlainJsonObject(value)) throw new ParamError(400, 'JSON body must be an object');
  return convertJsonObject(value, 1);
}

function isPlainJsonObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function convertJson(v: unknown, depth: number): ParamValue {
  if (v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return v;
  if (depth > MAX_DEPTH) throw new ParamError(400, 'JSON body nested too deep');
  if (Array.isArray(v)) return v.map((item) => convertJson(item, depth + 1));
  if (isPlainJsonObject(v)) return convertJsonObject(v, depth);
  return null;
}

function convertJsonObject(obj: Record<string, unknown>, depth: number): ParamHash {
  if (depth > MAX_DEPTH) throw new ParamError(400, 'JSON body nested too deep');
  const out = newHash();
  // Object.keys sees an own `__proto__` that JSON.parse created; it is dropped here with the others.
  for (const key of Object.keys(obj)) {
    if (FORBIDDEN_KEYS.has(key)) continue;
    out[key] = convertJson(obj[key], depth + 1);
  }
  return out;
}

/** Body params win over query params of the same top-level name (the seed's rule). */
export function mergeParams(query: ParamHash, body: ParamHash): ParamHash {
  const out = newHash();
  for (const key of Object.keys(query)) out[key] = query[key] as ParamValue;
  for (const key of Object.keys(body)) out[key] = body[key] as ParamValue;
  return out;
}

/**
 * The value at a parsed bracket name (`['user', 'email']` for `user[email]`), or undefined. Array
 * steps (`''`) are not followed: a name is looked up as a single value, as `params[:user][:email]`.
 */
export function lookUp(tree: ParamHash, path: readonly string[]): ParamValue | undefined {
  let node: ParamValue | undefined = tree;
  for (const segment of path) {
    if (!isHash(node) || segment === '') return undefined;
    node = node[segment];
  }
  return node;
}

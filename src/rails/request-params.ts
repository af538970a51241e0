/**
 * @module The request parameters the gateway reads as Rails would: wanted names in Rack bracket
 * notation, the query string's values, where Doorkeeper finds the token, and Rack's method override.
 */
import {
  formPairs,
  lookUp,
  pairsToHash,
  parseKey,
  parseUrlEncoded,
  ParamError,
  rack2Path,
  sameInRack2And3,
  type ParamHash,
} from './rack-params.js';
export { OVERRIDABLE_METHODS, resolveMethodOverride, type MethodOverride } from './method-override.js';

/** Doorkeeper's token parameters, in the order it tries them after the Authorization header. */
export const TOKEN_PARAMS: readonly string[] = Object.freeze(['access_token', 'bearer_token']);
/** Rack::MethodOverride's form field. */
export const METHOD_PARAM = '_method';

/** Names compiled once per snapshot, looked up per request. */
export interface WantedParams {
  /** The names as written (`user[email]`), the keys of every values map. */
  readonly names: readonly string[];
  /** Parsed bracket paths, same order. */
  readonly paths: readonly (readonly string[])[];
  /** Top-level keys (`user`): a multipart field under one of them after the first file is refused. */
  readonly tops: ReadonlySet<string>;
}

/** Throws on a name that is not one value in Rack notation (empty, or with `[]`). */
export function compileWantedParams(names: readonly string[]): WantedParams {
  const unique = [...new Set(names)];
  const paths = unique.map((name) => {
    const path = parseKey(name);
    if (path === undefined || path.includes(''))
      throw new Error(`"${name}" does not name one parameter (use e.g. user[email])`);
    return Object.freeze(path);
  });
  return Object.freeze({
    names: Object.freeze(unique),
    paths: Object.freeze(paths),
    tops: new Set(paths.map((p) => p[0]!)),
  });
}

/** The values found, by name as written. */
export type ParamValues = ReadonlyMap<string, string>;
export const NO_VALUES: ParamValues = new Map();

/**
 * The wanted values of a parameter tree. Scalars become text (a JSON number token is text to Rails
 * too); an array or hash where one value is wanted becomes `''`: present, but no usable value (Rack's
 * `to_s` of it is no method and no token either).
 */
export function valuesOf(tree: ParamHash, wanted: WantedParams): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < wanted.names.length; i++) {
    const v = lookUp(tree, wanted.paths[i]!);
    if (v === undefined || v === null) continue;
    out.set(wanted.names[i]!, typeof v === 'object' ? '' : String(v));
  }
  return out;
}

/**
 * Whether URL-encoded text can hold a wanted name at all: with no `%` escape, a key equals a wanted
 * top-level name only if that name occurs literally. Lets a query like `page=2&limit=40` skip parsing.
 */
function mayName(text: string, wanted: WantedParams): boolean {
  if (text.indexOf('%') !== -1) return true;
  for (const top of wanted.tops) if (text.indexOf(top) !== -1) return true;
  return false;
}

/**
 * The wanted values of URL-encoded text, or 'ambiguous'. Security: Rails 8 splits a query on `&` and
 * `;`, Rack 3.1 (whose `req.POST` Rack::MethodOverride reads) a form body on `&` only; since the last
 * value of a name wins, `_method=delete&x=1;_method=get` reads as DELETE to one and GET to the other.
 * Both splits are made, and a wanted value they disagree on is ambiguous: refused, never guessed;
 * so is a wanted name Rack 2 and Rack 3 nest differently (nestsDifferently).
 * Throws ParamError where Rails would refuse the text.
 */
export function formValues(text: string, wanted: WantedParams): ParamValues | 'ambiguous' {
  if (!mayName(text, wanted)) return NO_VALUES;
  const pairs = formPairs(text);
  for (const [key] of pairs) if (nestsDifferently(key, wanted)) return 'ambiguous';
  const both = valuesOf(pairsToHash(pairs), wanted);
  return text.indexOf(';') === -1 || sameSplitOnAmpersand(text, both, wanted) ? both : 'ambiguous';
}

/**
 * Security: Rack 2 skips leading brackets (`[access_token]` is `access_token` to it), Rack 3 does not;
 * a name the two nest differently, under a wanted top-level key of either, is ambiguous.
 */
export function nestsDifferently(key: string, wanted: WantedParams): boolean {
  if (key.indexOf('[') === -1 && key.indexOf(']') === -1) return false;
  if (sameInRack2And3(key)) return false;
  const top2 = rack2Path(key)?.[0];
  const top3 = parseKey(key)?.[0];
  return (top2 !== undefined && wanted.tops.has(top2)) || (top3 !== undefined && wanted.tops.has(top3));
}

/**
 * A query string (without `?`), read once per request: its pairs and its tree as Rails reads them
 * (split on `&` and `;`), each built at most once and only when asked. The wanted names' values and
 * every rule's lookup (`param:`, `when.query`) read the same tree.
 */
export class QueryParams {
  private pairList: Array<[string, string]> | undefined;
  /** null: Rails would refuse the query (type conflict, too many pairs); undefined: not parsed yet. */
  private tree: ParamHash | null | undefined;

  constructor(readonly text: string) {}

  /** The name/value pairs; throws ParamError (too many pairs) as pairsToHash would. */
  pairs(): Array<[string, string]> {
    return (this.pairList ??= formPairs(this.text));
  }

  /** The whole tree, parsed once; null when Rails would refuse the query. */
  hash(): ParamHash | null {
    if (this.tree === undefined) {
      try {
        this.tree = this.text.length === 0 ? EMPTY_QUERY : pairsToHash(this.pairs());
      } catch (err) {
        if (!(err instanceof ParamError)) throw err;
        this.tree = null;
      }
    }
    return this.tree;
  }
}

const EMPTY_QUERY: ParamHash = Object.freeze(Object.create(null) as ParamHash);
export const NO_QUERY = new QueryParams('');

/**
 * The wanted values of a query. A query Rails would refuse (type conflict, too many pairs) or one
 * whose wanted values depend on how `;` is read yields null: the caller answers 400, as Rails would,
 * rather than guess. The tree is the query's own (parsed once); with a `;`, the `&`-only reading of
 * the wanted names is checked against it.
 */
export function queryValues(query: QueryParams, wanted: WantedParams): ParamValues | null {
  const text = query.text;
  if (text.length === 0 || !mayName(text, wanted)) return NO_VALUES;
  try {
    for (const [key] of query.pairs()) if (nestsDifferently(key, wanted)) return null;
    const tree = query.hash();
    if (tree === null) return null;
    const both = valuesOf(tree, wanted);
    return text.indexOf(';') === -1 || sameSplitOnAmpersand(text, both, wanted) ? both : null;
  } catch (err) {
    if (err instanceof ParamError) return null;
    throw err;
  }
}

/** Whether the wanted values read the same when the text is split on `&` only (Rack 3's form reading). */
function sameSplitOnAmpersand(text: string, both: ParamValues, wanted: WantedParams): boolean {
  const ampOnly = valuesOf(parseUrlEncoded(text, undefined, false), wanted);
  if (ampOnly.size !== both.size) return false;
  for (const [name, value] of both) if (ampOnly.get(name) !== value) return false;
  return true;
}

export type ParamPick =
  { readonly kind: 'absent' } | { readonly kind: 'value'; readonly value: string } | { readonly kind: 'conflict' };

const ABSENT: ParamPick = Object.freeze({ kind: 'absent' });
const CONFLICT: ParamPick = Object.freeze({ kind: 'conflict' });

/**
 * One parameter from the query and the body together. Rails lets the query win over the body (and the
 * built-in upstream the body over the query), so two different values are a conflict the caller
 * refuses (400): counting either one could count the request against the wrong key.
 */
export function pickParam(name: string, query: ParamValues, body: ParamValues): ParamPick {
  const q = query.get(name);
  const b = body.get(name);
  if (q === undefined) return b === undefined ? ABSENT : { kind: 'value', value: b };
  if (b === undefined || b === q) return { kind: 'value', value: q };
  return CONFLICT;
}

export type TokenPick =
  | { readonly kind: 'none' }
  | { readonly kind: 'token'; readonly token: string; readonly from: 'header' | 'param' }
  | { readonly kind: 'conflict'; readonly param: string };

const NO_TOKEN: TokenPick = Object.freeze({ kind: 'none' });

/**
 * The token of the Authorization header exactly as Doorkeeper takes it: the header must start with
 * `Bearer ` (any case, one space: a tab does not match), and the token is everything after it. Security:
 * a laxer reading (e.g. accepting `Bearer<TAB>junk`) would let a client show the gateway a junk header
 * token while Doorkeeper skips it and authenticates the `access_token` parameter instead.
 */
export function doorkeeperHeaderToken(authorization: string | undefined): string | null {
  if (authorization === undefined || authorization.length < 8) return null;
  const s = authorization;
  if (
    (s.charCodeAt(0) | 0x20) !== 0x62 || // b
    (s.charCodeAt(1) | 0x20) !== 0x65 || // e
    (s.charCodeAt(2) | 0x20) !== 0x61 || // a
    (s.charCodeAt(3) | 0x20) !== 0x72 || // r
    (s.charCodeAt(4) | 0x20) !== 0x65 || // e
    (s.charCodeAt(5) | 0x20) !== 0x72 || // r
    s.charCodeAt(6) !== 0x20
  ) {
    return null;
  }
  const token = s.slice(7);
  // Doorkeeper moves on to the parameters when the header's token is blank.
  return token.trim() === '' ? null : token;
}

/**
 * The token Doorkeeper authenticates a request with: `Authorization: Bearer …` first, then the
 * `access_token` parameter, then `bearer_token` (query or body). An empty value is skipped, as
 * Doorkeeper skips a blank one. `query` and `body` must have been read with TOKEN_PARAMS wanted.
 */
export function doorkeeperToken(authorization: string | undefined, query: ParamValues, body: ParamValues): TokenPick {
  const header = doorkeeperHeaderToken(authorization);
  if (header !== null) return { kind: 'token', token: header, from: 'header' };
  for (const name of TOKEN_PARAMS) {
    const pick = pickParam(name, query, body);
    if (pick.kind === 'conflict') return { kind: 'conflict', param: name };
    if (pick.kind === 'value' && pick.value.trim() !== '') return { kind: 'token', token: pick.value, from: 'param' };
  }
  return NO_TOKEN;
}

/**
 * Which of Content-Type and Authorization appears more than once in the raw header list, or null.
 * Security: Node keeps the first of each, while Puma joins repeated headers and Rack then reads the
 * last boundary or media type, and Doorkeeper a joined Authorization: a second header would let the
 * upstream read a body or token the gateway never counted. Allocates nothing.
 */
export function duplicatedHeader(raw: readonly string[]): 'content-type' | 'authorization' | null {
  let type = 0;
  let auth = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 12 && sameLetters(name, 'content-type')) {
      if (++type > 1) return 'content-type';
    } else if (name.length === 13 && sameLetters(name, 'authorization')) {
      if (++auth > 1) return 'authorization';
    }
  }
  return null;
}

/**
 * `name` equals `lower` (letters and `-` only) ignoring case, without allocating: setting bit 0x20
 * lower-cases a letter and leaves `-` as it is (only CR, which no header name holds, would also map to `-`).
 */
function sameLetters(name: string, lower: string): boolean {
  for (let i = 0; i < lower.length; i++) if ((name.charCodeAt(i) | 0x20) !== lower.charCodeAt(i)) return false;
  return true;
}

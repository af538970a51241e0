/**
 * @module What a request offers the limit rules besides its route: its token (wherever it was sent),
 * header values, parameters in Rack bracket notation, and whether its query pages. Read lazily and
 * once per request; the request path builds one only when a matched rule needs it.
 */
import type http from 'node:http';
import { tokenDigest } from '../identity/index.js';
import { isHash, lookUp, ParamError, parseUrlEncoded, type ParamHash, type ParamValue } from '../rack-params.js';
import type { CompiledRule } from '../config/types.js';
import { paramPath } from '../config/limit-model.js';
import { normalizeParamKey } from '../identity/key-normalize.js';

/** The `param:` values the pipeline read (query and body together, server/read-params.ts), by name as written. */
export type BodyParams = ReadonlyMap<string, string>;

const EMPTY_HASH: ParamHash = Object.freeze(Object.create(null) as ParamHash);
const NO_BODY: BodyParams = new Map();

/** A query string Rails would refuse (conflicting types, too many pairs): read as no parameters at all. */
const UNREADABLE: ParamHash = Object.freeze(Object.create(null) as ParamHash);

/** One request's facts, each read at most once. */
export class RequestFacts {
  private queryTree: ParamHash | undefined;
  private tokenRead = false;
  private tokenValue: string | null = null;
  private tokenHash: string | null | undefined;

  constructor(
    private readonly headers: http.IncomingHttpHeaders,
    private readonly rawQuery: string,
    private readonly token: () => string | null,
    private readonly body: BodyParams = NO_BODY,
    /** What the body peek found of every wanted name (`when.query` names too), the body alone. */
    private readonly form: BodyParams = NO_BODY,
  ) {}

  /** The token's SHA-256 hex digest, or null without a token. */
  tokenDigest(): string | null {
    if (this.tokenHash === undefined) this.tokenHash = this.rawToken() === null ? null : tokenDigest(this.rawToken()!);
    return this.tokenHash;
  }

  rawToken(): string | null {
    if (!this.tokenRead) {
      this.tokenRead = true;
      this.tokenValue = this.token();
    }
    return this.tokenValue;
  }

  /** A header's first value, trimmed; undefined when absent or blank. `name` is lower-case. */
  header(name: string): string | undefined {
    const v = this.headers[name];
    const first = Array.isArray(v) ? v[0] : v;
    if (first === undefined) return undefined;
    const t = first.trim();
    return t === '' ? undefined : t;
  }

  /**
   * A cookie's value, as Rack reads the `Cookie` header: pairs split on `;`, the first of a name wins,
   * the value unescaped (`+` and %XX) and trimmed; undefined when absent or blank. A cookie is only a
   * key: it never says who the client is (the upstream does, through the account).
   */
  cookie(name: string): string | undefined {
    const raw = this.headers.cookie;
    if (raw === undefined) return undefined;
    for (const pair of raw.split(';')) {
      const eq = pair.indexOf('=');
      if (eq < 0 || pair.slice(0, eq).trim() !== name) continue;
      const v = unescapeCookie(pair.slice(eq + 1)).trim();
      return v === '' ? undefined : v;
    }
    return undefined;
  }

  /**
   * A parameter's value as one scalar, as sent (keyValueDigest normalizes it); undefined when absent,
   * blank (Rails' `presence`), or not one value (an array or hash where one value is named). The query
   * string is read first, then the body, as Rails merges them for `params` (the query wins).
   */
  param(name: string, path: readonly string[]): string | undefined {
    const q = scalar(lookUp(this.query(), path));
    if (q !== undefined) return q;
    const b = this.body.get(name);
    return b === undefined || b.trim() === '' ? undefined : b;
  }

  /**
   * Any of `names` (bracket `paths`, compiled at load) has a non-blank value (Rails' `present?`) in the
   * query string or the body: Rack's `params` is GET merged with POST, and a GET's form body is read too.
   */
  queryHasAny(names: readonly string[], paths: readonly (readonly string[])[]): boolean {
    const tree = this.query();
    for (let i = 0; i < names.length; i++) {
      const b = this.form.get(names[i]!);
      if (b !== undefined && b.trim() !== '') return true;
      const v = lookUp(tree, paths[i]!);
      if (v === undefined || v === null) continue;
      if (typeof v === 'string' ? v.trim() !== '' : Array.isArray(v) ? v.length > 0 : isHash(v) ? Object.keys(v).length > 0 : true) return true;
    }
    return false;
  }

  /** False for a query string Rails would refuse: the gateway answers 400 rather than guess its values. */
  queryReadable(): boolean {
    return this.query() !== UNREADABLE;
  }

  private query(): ParamHash {
    if (this.queryTree === undefined) {
      if (this.rawQuery.length <= 1) this.queryTree = EMPTY_HASH;
      else {
        try {
          this.queryTree = parseUrlEncoded(this.rawQuery.startsWith('?') ? this.rawQuery.slice(1) : this.rawQuery);
        } catch (err) {
          if (!(err instanceof ParamError)) throw err;
          this.queryTree = UNREADABLE;
        }
      }
    }
    return this.queryTree;
  }
}

/** Rack's unescape of a cookie value; a malformed %-escape is kept as sent (as Rack keeps it). */
function unescapeCookie(v: string): string {
  try {
    return decodeURIComponent(v.replace(/\+/g, ' '));
  } catch {
    return v;
  }
}

function scalar(v: ParamValue | undefined): string | undefined {
  if (v === undefined || v === null || typeof v === 'object') return undefined;
  const s = String(v);
  return s.trim() === '' ? undefined : s;
}

/** Whether a rule reads a request parameter (the body peek must then look at a form or JSON body). */
export function readsParams(rule: CompiledRule): boolean {
  return rule.per === 'param';
}

/** Every `param:` name of a table, as written: what the body peek is asked to find (with the token's). */
export function paramNames(rules: readonly CompiledRule[]): string[] {
  const names = new Set<string>();
  for (const r of rules) if (r.per === 'param') names.add(r.keyName);
  return [...names];
}

/** Every `when.query` name that names one value in Rack notation: the body peek looks for them too. */
export function whenQueryNames(rules: readonly CompiledRule[]): string[] {
  const names = new Set<string>();
  for (const r of rules) for (const q of r.whenQuery ?? []) if (paramPath(q) !== undefined) names.add(q);
  return [...names];
}

/** SHA-256 hex of a key value: tokens are secrets and e-mail addresses personal data; neither is kept. */
export function valueDigest(value: string): string {
  return tokenDigest(value);
}

/**
 * The key value a `per: header | param` rule digests, normalized. `param:` as Rack::Attack's default
 * discriminator normalizer and Devise read it (Ruby `strip`, NUL included, then `downcase`): every
 * capitalisation of an e-mail address is one bucket. `header:` only trimmed, case kept: API keys and
 * similar header values are case-sensitive, and folding them would let one client spend another's
 * budget. One place for the request path, overrides' keys and the admin API alike.
 */
export function normalizedKey(per: 'header' | 'param', value: string): string {
  return per === 'param' ? normalizeParamKey(value) : value.trim();
}

/** The digest of a header or parameter key value, normalized (see normalizedKey). */
export function keyValueDigest(per: 'header' | 'param', value: string): string {
  return valueDigest(normalizedKey(per, value));
}

/**
 * The digest a `per: token | header | param | cookie` rule keys this request on, or null when the request has
 * no such value (the rule is then skipped). Other kinds: null.
 */
export function ruleValueDigest(rule: CompiledRule, facts: RequestFacts): string | null {
  switch (rule.per) {
    case 'token':
      return facts.tokenDigest();
    case 'header': {
      const v = facts.header(rule.keyName);
      return v === undefined ? null : keyValueDigest('header', v);
    }
    case 'param': {
      const v = facts.param(rule.keyName, rule.paramPath!);
      return v === undefined ? null : keyValueDigest('param', v);
    }
    case 'cookie': {
      const v = facts.cookie(rule.keyName);
      return v === undefined ? null : valueDigest(v);
    }
    default:
      return null;
  }
}

/** Why a rule's `when` does not hold, or null when it holds. `authenticated` is whether the request has an account. */
export function whenFails(rule: CompiledRule, facts: RequestFacts | null, authenticated: boolean): string | null {
  if (rule.whenAuthenticated !== undefined && rule.whenAuthenticated !== authenticated) {
    return rule.whenAuthenticated ? 'when.authenticated: the request has no account' : 'when.authenticated: false, and the request has an account';
  }
  if (rule.whenQuery !== null && (facts === null || !facts.queryHasAny(rule.whenQuery, rule.whenQueryPaths!))) {
    return `when.query: none of ${rule.whenQuery.join(', ')} is in the query string or a form body`;
  }
  return null;
}

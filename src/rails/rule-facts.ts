/**
 * @module What a request offers the limit rules besides its route, as Rack reads it: header values,
 * cookies, parameters in Rack bracket notation (the query's tree, parsed once, and the body's values),
 * whether its query pages. Read lazily and once per request;
 * the request path builds one only when a rule that may apply needs it.
 */
import type http from 'node:http';
import { isHash, lookUp, type ParamValue } from './rack-params.js';
import type { CompiledRule } from '../config/types.js';
import { paramPath } from '../keys/index.js';
import { headerAsRackReads } from '../http/header-spelling.js';
import type { QueryParams } from './request-params.js';
import { accountConditionFails, type AccountFacts } from '../identity/account-facts.js';

/** The `param:` values the pipeline read (query and body together, rails/read-params.ts), by name as written. */
export type BodyParams = ReadonlyMap<string, string>;

const NO_BODY: BodyParams = new Map();

/** One request's facts, each read at most once. */
export class RequestFacts {
  constructor(
    private readonly headers: http.IncomingHttpHeaders,
    private readonly query: QueryParams,
    private readonly body: BodyParams = NO_BODY,
    /** What the body peek found of every wanted name (`when.query` names too), the body alone. */
    private readonly form: BodyParams = NO_BODY,
  ) {}

  /** A header's first value, trimmed; undefined when absent or blank. `name` is lower-case; read in any spelling Puma reads as it (`_` = `-`). */
  header(name: string): string | undefined {
    const v = headerAsRackReads(this.headers, name);
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
   * A parameter's value as one scalar, as sent (the key kind normalizes it); undefined when absent,
   * blank (Rails' `presence`), or not one value (an array or hash where one value is named). The query
   * string is read first, then the body, as Rails merges them for `params` (the query wins).
   */
  param(name: string, path: readonly string[]): string | undefined {
    const tree = this.query.hash();
    const q = tree === null ? undefined : scalar(lookUp(tree, path));
    if (q !== undefined) return q;
    const b = this.body.get(name);
    return b === undefined || b.trim() === '' ? undefined : b;
  }

  /**
   * Any of `names` (bracket `paths`, compiled at load) has a non-blank value (Rails' `present?`) in the
   * query string or the body: Rack's `params` is GET merged with POST, and a GET's form body is read too.
   */
  queryHasAny(names: readonly string[], paths: readonly (readonly string[])[]): boolean {
    const tree = this.query.hash();
    for (let i = 0; i < names.length; i++) {
      const b = this.form.get(names[i]!);
      if (b !== undefined && b.trim() !== '') return true;
      const v = tree === null ? undefined : lookUp(tree, paths[i]!);
      if (v === undefined || v === null) continue;
      if (
        typeof v === 'string'
          ? v.trim() !== ''
          : Array.isArray(v)
            ? v.length > 0
            : isHash(v)
              ? Object.keys(v).length > 0
              : true
      )
        return true;
    }
    return false;
  }

  /** False for a query string Rails would refuse: the gateway answers 400 rather than guess its values. */
  queryReadable(): boolean {
    return this.query.hash() !== null;
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

/** Every `when.query` name that names one value in Rack notation: the body peek looks for them too. */
export function whenQueryNames(rules: readonly CompiledRule[]): string[] {
  const names = new Set<string>();
  for (const r of rules) for (const q of r.whenQuery ?? []) if (paramPath(q) !== undefined) names.add(q);
  return [...names];
}

/** Why a rule's `when` does not hold, or null when it holds. `authenticated` is whether the request has an account. */
export function whenFails(
  rule: CompiledRule,
  facts: Pick<RequestFacts, 'queryHasAny'> | null,
  authenticated: boolean,
  account: { readonly key: string | null; readonly facts: AccountFacts | null; readonly now: number } | null = null,
): string | null {
  if (rule.whenAuthenticated !== undefined && rule.whenAuthenticated !== authenticated) {
    return rule.whenAuthenticated
      ? 'when.authenticated: the request has no account'
      : 'when.authenticated: false, and the request has an account';
  }
  if (rule.whenAccount !== null) {
    const fails = accountConditionFails(
      rule.whenAccount,
      account?.key ?? null,
      account?.facts ?? null,
      account?.now ?? Date.now(),
    );
    if (fails !== null) return fails;
  }
  if (rule.whenQuery !== null && (facts === null || !facts.queryHasAny(rule.whenQuery, rule.whenQueryPaths!))) {
    return `when.query: none of ${rule.whenQuery.join(', ')} is in the query string or a form body`;
  }
  return null;
}

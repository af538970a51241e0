/**
 * @module What a rule needs from a request, as bit flags: each key kind, `when` condition, override and
 * method-bound pattern sets some; a rule's flags are compiled at load and the request path takes the
 * union over every rule that may apply (limits, bans, in-flight limits, routes) to decide what to read.
 */

/** One bit per fact; a rule's `needs` is their union. */
export const NEED = Object.freeze({
  /** The account (token's owner, trusted header): may be an upstream call (introspection). */
  account: 1,
  /** The token wherever Doorkeeper reads it: the Authorization header, the query, a form or JSON body. */
  token: 2,
  /** Request parameters wherever Rails reads them: the query, a form or a JSON body (`param:`). */
  params: 4,
  /** Rack's params: the query and a form body, not JSON (`when.query`). */
  form: 8,
  /** The query string, parsed (a query Rails would refuse is then answered 400). */
  query: 16,
  /** A header's value. */
  header: 32,
  /** A cookie's value. */
  cookie: 64,
  /** The method Rails routes by: a POST's override (`_method`, X-HTTP-Method-Override) can change what applies. */
  method: 128,
});

export type NeedName = keyof typeof NEED;

/** No fact beyond the route and the client's IP (`per: ip` or `global`, no `when`, no overrides). */
export const NEEDS_NOTHING = 0;

/** Whether `needs` includes `flag`. */
export function needs(needs: number, flag: number): boolean {
  return (needs & flag) !== 0;
}

/** The names of the flags set, in NEED's order: for `rategate check`, explain and tests. */
export function needNames(needs: number): NeedName[] {
  const out: NeedName[] = [];
  for (const [name, bit] of Object.entries(NEED) as [NeedName, number][]) if ((needs & bit) !== 0) out.push(name);
  return out;
}

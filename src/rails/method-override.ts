/** @module Rack::MethodOverride as the upstream applies it: which method a POST is routed as. */

/** The common answer (no override at all), allocated once per method Rack knows: the hot path's case. */
const UNCHANGED = new Map<string, MethodOverride>();

function unchanged(method: string): MethodOverride {
  let hit = UNCHANGED.get(method);
  if (hit === undefined) {
    hit = Object.freeze({ method, dropHeader: false });
    // Only known methods are remembered: a client inventing methods must not grow the map.
    if (OVERRIDABLE_METHODS.has(method)) UNCHANGED.set(method, hit);
  }
  return hit;
}

/** Rack::MethodOverride::HTTP_METHODS: the only methods an override may name. */
export const OVERRIDABLE_METHODS: ReadonlySet<string> = new Set([
  'GET',
  'HEAD',
  'PUT',
  'POST',
  'DELETE',
  'OPTIONS',
  'PATCH',
  'LINK',
  'UNLINK',
]);

export interface MethodOverride {
  /** The method the upstream (Rails behind Rack::MethodOverride) routes the request as. */
  readonly method: string;
  /**
   * X-HTTP-Method-Override is present but is not what decided `method` (not a POST, the form field
   * won, or no method Rack knows): the caller removes it, so no later layer reads it differently.
   */
  readonly dropHeader: boolean;
}

/**
 * Rack::MethodOverride, exactly: only a POST is overridden; the `_method` form field (URL-encoded or
 * multipart, or a POST without a Content-Type; never JSON, never the query) wins over the
 * X-HTTP-Method-Override header whenever the field is present, even empty; the name is upper-cased and
 * must be one of OVERRIDABLE_METHODS, else the request stays a POST. `formMethod` is the field's value
 * (`''` for an array or hash), undefined when absent or not a form body.
 */
export function resolveMethodOverride(
  method: string,
  header: string | undefined,
  formMethod: string | undefined,
): MethodOverride {
  if (method !== 'POST') return header === undefined ? unchanged(method) : { method, dropHeader: true };
  const named = formMethod !== undefined ? formMethod : header;
  if (named === undefined) return unchanged(method);
  const upper = named.toUpperCase();
  const valid = OVERRIDABLE_METHODS.has(upper);
  return { method: valid ? upper : method, dropHeader: header !== undefined && (formMethod !== undefined || !valid) };
}

/**
 * @module Header names as Puma and Rack compare them. Puma builds the Rack env key of a header by
 * upper-casing its name and turning `-` into `_` (HTTP_X_REAL_IP), and, when no dashed spelling came,
 * an `_` in the name ends up there too: to the app `X_Real_IP` is X-Real-IP. Every place that drops or
 * rebuilds a header by name compares the name so folded, or the other spelling walks past it.
 */
import type http from 'node:http';

/** `lower` (a lower-cased header name) with `_` read as `-`; the same length, so a shape check by length still holds. */
export function rackSpelling(lower: string): string {
  return lower.includes('_') ? lower.replaceAll('_', '-') : lower;
}

/**
 * The value Puma gives the app for the header `name` (lower-case, dashed): the dashed spelling's when
 * sent (an underscore spelling cannot clobber it), else that of a spelling with `_` for some `-`. The
 * scan runs only when the dashed spelling is absent and `name` has a `-` to be spelled otherwise.
 */
export function headerAsRackReads(headers: http.IncomingHttpHeaders, name: string): string | string[] | undefined {
  const dashed = headers[name];
  if (dashed !== undefined || !name.includes('-')) return dashed;
  for (const key in headers)
    if (key.length === name.length && key.includes('_') && rackSpelling(key) === name) return headers[key];
  return undefined;
}

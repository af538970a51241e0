/**
 * @module Header names as Puma and Rack compare them. Puma builds the Rack env key of a header by
 * upper-casing its name and turning `-` into `_` (HTTP_X_REAL_IP), and, when no dashed spelling came,
 * an `_` in the name ends up there too: to the app `X_Real_IP` is X-Real-IP. Every place that drops or
 * rebuilds a header by name compares the name so folded, or the other spelling walks past it.
 */

/** `lower` (a lower-cased header name) with `_` read as `-`; the same length, so a shape check by length still holds. */
export function rackSpelling(lower: string): string {
  return lower.includes('_') ? lower.replaceAll('_', '-') : lower;
}

/** @module The upstream's response head as the client gets it: hop-by-hop headers dropped, the gateway's rate-limit headers added or merged. */
import { connectionListed, isHopByHop, isRateLimitHeader } from './hop-by-hop.js';
import { mergeUpstreamLimits } from './upstream-limits.js';

/**
 * The upstream's head for the client, with the gateway's rate-limit headers (`extra`). On a matched route
 * (`merge`) the upstream's own rate-limit headers are set aside and merged (upstream-limits.ts); the
 * common case, an upstream that sends none, costs nothing more than appending the gateway's.
 */
export function clientResponseHeaders(
  status: number,
  headers: Record<string, string | string[] | undefined>,
  merge: boolean,
  extra: readonly string[],
): string[] {
  const listed = connectionListed(headers.connection);
  const out: string[] = [];
  let upstreamLimits: string[] | null = null;
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || isHopByHop(name, listed)) continue;
    if (merge && isRateLimitHeader(name)) {
      upstreamLimits ??= [];
      upstreamLimits.push(name, Array.isArray(value) ? value.join(', ') : value);
      continue;
    }
    if (Array.isArray(value)) for (const v of value) out.push(name, v);
    else out.push(name, value);
  }
  if (merge && (upstreamLimits !== null || status === 429)) {
    mergeUpstreamLimits(out, status, upstreamLimits ?? [], extra, headers['retry-after'] !== undefined, Date.now());
  } else for (const h of extra) out.push(h);
  return out;
}

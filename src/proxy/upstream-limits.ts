/**
 * @module The upstream's own rate limits beside the gateway's (Mastodon sends X-RateLimit-* on its
 * answers): an upstream 429 keeps the upstream's headers (its refusal, not the gateway's bucket), with a
 * Retry-After only when its reset can be read; any other answer shows the tighter X-RateLimit-* triple.
 */
import { secondsUntil } from '../http/message.js';

const TRIPLE = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'] as const;
/** Mastodon's reset format (ISO 8601, any fraction) or an RFC 3339 time with an offset. */
const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;

/**
 * Appends to `out` (flat name/value pairs) the rate-limit headers the client gets, from the upstream's
 * (`upstream`: its rate-limit headers, lower-case names, flat pairs) and the gateway's (`gateway`).
 * `hasRetryAfter`: the upstream's answer carries its own Retry-After (already in `out`).
 */
export function mergeUpstreamLimits(
  out: string[],
  status: number,
  upstream: readonly string[],
  gateway: readonly string[],
  hasRetryAfter: boolean,
  now: number,
): void {
  if (status === 429) {
    // The upstream refused: its own headers say why; the gateway's bucket (still open) would contradict it.
    for (const h of upstream) out.push(h);
    if (!hasRetryAfter) {
      const at = resetTime(valueOf(upstream, 'x-ratelimit-reset'));
      if (at !== undefined && at > now) out.push('Retry-After', String(secondsUntil(at, now)));
    }
    return;
  }
  const upRemaining = count(valueOf(upstream, 'x-ratelimit-remaining'));
  const gwRemaining = count(valueOf(gateway, 'x-ratelimit-remaining'));
  // The triple of the side with fewer requests left: what the client will run into first.
  const upstreamTighter = upRemaining !== undefined && (gwRemaining === undefined || upRemaining < gwRemaining);
  const tripleFrom = upstreamTighter ? upstream : gateway;
  for (let i = 0; i < tripleFrom.length; i += 2)
    if (isTriple(tripleFrom[i]!)) out.push(tripleFrom[i]!, tripleFrom[i + 1]!);
  // The IETF fields are lists of policies: both sides' items are true, so both are shown.
  for (const name of ['ratelimit', 'ratelimit-policy']) {
    const items = [valueOf(gateway, name), valueOf(upstream, name)].filter(
      (v): v is string => v !== undefined && v !== '',
    );
    if (items.length > 0) out.push(name, items.join(', '));
  }
  // Anything else the gateway adds (none today) passes; other upstream x-ratelimit-* names pass too.
  for (let i = 0; i < gateway.length; i += 2) if (!isKnown(gateway[i]!)) out.push(gateway[i]!, gateway[i + 1]!);
  for (let i = 0; i < upstream.length; i += 2) if (!isKnown(upstream[i]!)) out.push(upstream[i]!, upstream[i + 1]!);
}

function isTriple(name: string): boolean {
  return (TRIPLE as readonly string[]).includes(name.toLowerCase());
}

function isKnown(name: string): boolean {
  const lower = name.toLowerCase();
  return isTriple(lower) || lower === 'ratelimit' || lower === 'ratelimit-policy';
}

function valueOf(pairs: readonly string[], lowerName: string): string | undefined {
  for (let i = 0; i < pairs.length; i += 2) if (pairs[i]!.toLowerCase() === lowerName) return pairs[i + 1];
  return undefined;
}

function count(v: string | undefined): number | undefined {
  return v !== undefined && /^\d+$/.test(v.trim()) ? Number(v.trim()) : undefined;
}

/**
 * The instant an upstream's X-RateLimit-Reset names, when it can be read without guessing: an ISO 8601
 * time (Mastodon's), or Unix seconds (a number of 10 digits or more). A small number could be a delta or
 * a timestamp: left unread, so no Retry-After is made up.
 */
export function resetTime(v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const s = v.trim();
  if (ISO_TIME.test(s)) {
    const ms = Date.parse(s);
    return Number.isNaN(ms) ? undefined : ms;
  }
  if (/^\d{10,}$/.test(s)) return Number(s) * 1000;
  return undefined;
}

/**
 * @module Header hygiene between client and upstream. Hop-by-hop headers (RFC 9110 §7.6.1) describe one
 * connection, not the message, so a proxy must not forward them — including any extra header a peer
 * names in `Connection`; and on a matched route the upstream's rate-limit headers are set aside to be
 * merged with the gateway's (upstream-limits.ts). Names are compared as Puma compares them (`_` = `-`,
 * http/header-spelling.ts): `Keep_Alive` is Keep-Alive to the app behind.
 */
import { rackSpelling } from '../http/header-spelling.js';

/** The hop-by-hop headers of RFC 9110 (and the non-standard ones peers still send), lower-case. */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'http2-settings',
]);

/** Names listed in a `Connection` header value, lower-cased and folded (rackSpelling); null when there are none beyond the standard ones. */
export function connectionListed(value: string | string[] | undefined): Set<string> | null {
  // The common values name nothing extra: answer without splitting.
  if (value === undefined || value === 'keep-alive' || value === 'close' || value === 'Keep-Alive') return null;
  const joined = Array.isArray(value) ? value.join(',') : value;
  let set: Set<string> | null = null;
  for (const part of joined.split(',')) {
    const name = rackSpelling(part.trim().toLowerCase());
    // `close` and `keep-alive` are the common values and are hop-by-hop anyway.
    if (name && name !== 'close' && name !== 'keep-alive') (set ??= new Set()).add(name);
  }
  return set;
}

/**
 * Whether `Connection` names a header that frames the message or routes it (`Content-Length`,
 * `Transfer-Encoding`, `Host`). A proxy drops what `Connection` names: the request would then end
 * elsewhere than where the client's parser ended it (one request on the wire read as two), so such a
 * request is refused instead.
 */
export function namesFraming(listed: Set<string> | null): boolean {
  return listed !== null && (listed.has('content-length') || listed.has('transfer-encoding') || listed.has('host'));
}

export function isHopByHop(lowerName: string, listed: Set<string> | null): boolean {
  const name = rackSpelling(lowerName);
  return HOP_BY_HOP.has(name) || (listed !== null && listed.has(name));
}

/** A rate-limit header (lower-case name): merged with the gateway's own on a matched route. */
export function isRateLimitHeader(lower: string): boolean {
  return lower.startsWith('x-ratelimit-') || lower === 'ratelimit' || lower === 'ratelimit-policy';
}

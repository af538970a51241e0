/**
 * @module The request target as the logs show it: the value of every credential-like query parameter
 * replaced by `[redacted]`. Doorkeeper reads `?access_token=` on every API call and OAuth sends codes,
 * secrets and passwords in query strings, so a path logged whole (a request refused before the path
 * was normalized, a block, the drain) would write them to disk and to whoever reads the logs.
 */

/** What a redacted value reads as. */
export const REDACTED = '[redacted]';

/** A parameter whose name (or a bracket part of it) contains one of these is a credential. */
const SECRET_WORDS = [
  'token',
  'password',
  'passwd',
  'secret',
  'credential',
  'signature',
  'apikey',
  'api_key',
  'api-key',
  'otp',
];
/** Names too short to look for inside others (`code` is in `postcode`), matched whole. */
const SECRET_NAMES: ReadonlySet<string> = new Set([
  'code',
  'key',
  'auth',
  'authorization',
  'session',
  'sig',
  'jwt',
  'assertion',
  'pin',
]);

/** A percent escape, and Rack's bracket marks that split `user[password]` into its parts. */
const ESCAPE = /%([0-9a-f]{2})/g;
const BRACKETS = /[[\]]/;

/**
 * `target` (a request's path and query) with credential values redacted. Costs one `indexOf` when there
 * is no query, the common case of every normalized path. After a `#` (never sent by a browser) nothing
 * is kept: a fragment has no parameters to tell apart.
 */
export function loggedPath(target: string): string {
  const q = target.indexOf('?');
  if (q === -1) return target;
  const hash = target.indexOf('#', q);
  const query = hash === -1 ? target.slice(q + 1) : target.slice(q + 1, hash);
  const rest =
    hash === -1 || hash === target.length - 1 ? target.slice(hash === -1 ? target.length : hash) : `#${REDACTED}`;
  return `${target.slice(0, q + 1)}${redactedQuery(query)}${rest}`;
}

/** The pairs of `query` as sent, the value of each credential replaced. Rack 2 splits on `&` and `;`. */
function redactedQuery(query: string): string {
  let out = '';
  let start = 0;
  while (start <= query.length) {
    let end = start;
    while (end < query.length && query[end] !== '&' && query[end] !== ';') end++;
    const pair = query.slice(start, end);
    const eq = pair.indexOf('=');
    out += eq !== -1 && isCredential(pair.slice(0, eq)) ? `${pair.slice(0, eq + 1)}${REDACTED}` : pair;
    if (end < query.length) out += query[end];
    start = end + 1;
  }
  return out;
}

/** Whether a parameter named `raw` (as sent: any case, percent-encoded, Rack's brackets) is a credential. */
export function isCredential(raw: string): boolean {
  let name = raw.toLowerCase();
  // Rack decodes names before Doorkeeper reads them: `access%5Ftoken` is access_token.
  if (name.includes('%')) name = name.replace(ESCAPE, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  for (const part of name.split(BRACKETS)) {
    if (SECRET_NAMES.has(part)) return true;
    for (const word of SECRET_WORDS) if (part.includes(word)) return true;
  }
  return false;
}

/**
 * @module What a browser may have been made to send to the admin listener, refused: a `Host` that names none of this listener's addresses (DNS rebinding: another site's name made to
 * resolve to us, so its page reads and writes as if it were ours), and a write from another origin or
 * whose body is not JSON (a cross-site form or "simple" fetch, which a browser sends without asking).
 * The Host is checked before the door (the token), a write's origin and body type right after it.
 * Security: with no token on a loopback listener (the documented default), these checks are all that
 * stands between any web page the operator opens and the admin API.
 */
import type http from 'node:http';
import os from 'node:os';
import { parseHostPort } from '../config/index.js';
import { parseIp } from '../identity/index.js';

export type BrowserRefusal = { readonly status: 403 | 415 | 421; readonly error: string };

/** A Host header's shape: a DNS name or dotted quad, or a bracketed IPv6 literal; an optional port. Nothing else (`@`, `%`, spaces). */
const HOST_HEADER = /^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]{2,45}\])(?::\d{1,5})?$/;
const WILDCARDS: ReadonlySet<string> = new Set(['0.0.0.0', '::', '']);

/**
 * The host part of a Host header in canonical form (lower case, no trailing dot, IPv6 unbracketed and
 * compressed, IPv4-mapped IPv6 as IPv4), or null when it is not a host name or address at all. The
 * port is dropped: a port-forward (`kubectl port-forward 19464:9464`) changes it, and a rebinding page
 * cannot choose our address whatever the port.
 */
export function canonicalHost(header: string): string | null {
  if (!HOST_HEADER.test(header)) return null;
  if (header.charCodeAt(0) === 0x5b /* [ */) {
    const ip = parseIp(header.slice(1, header.indexOf(']')));
    return ip === null ? null : ip.toString();
  }
  const colon = header.indexOf(':');
  const name = (colon === -1 ? header : header.slice(0, colon)).toLowerCase();
  const bare = name.endsWith('.') ? name.slice(0, -1) : name;
  return parseIp(bare)?.toString() ?? bare;
}

/**
 * The names a request may give as its Host on a listener at `listen`: its own address; with a wildcard
 * address (0.0.0.0, ::), every address of this host's interfaces (read once, at start); and `localhost`
 * whenever the listener takes loopback connections. Computed once per listener, looked up per request.
 */
export function listenerNames(
  listen: string,
  interfaces: NodeJS.Dict<os.NetworkInterfaceInfo[]> = os.networkInterfaces(),
): ReadonlySet<string> {
  const host = parseHostPort(listen)?.host ?? '';
  const names = new Set<string>();
  const add = (h: string): void => void names.add(canonicalHost(h.includes(':') ? `[${h}]` : h) ?? h.toLowerCase());
  if (WILDCARDS.has(host)) {
    for (const list of Object.values(interfaces)) for (const i of list ?? []) add(i.address);
    add('localhost');
  } else add(host);
  const loopbackAddress = parseIp(host)?.range() === 'loopback';
  if (loopbackAddress || host.toLowerCase() === 'localhost') ['localhost', '127.0.0.1', '::1'].forEach(add);
  return names;
}

/** The canonical allowedHosts of a config, kept per list: looked up per request, built once per snapshot. */
const allowedCache = new WeakMap<readonly string[], ReadonlySet<string>>();

function allowedSet(allowedHosts: readonly string[]): ReadonlySet<string> {
  let set = allowedCache.get(allowedHosts);
  if (set === undefined) {
    set = new Set(
      allowedHosts.map((h) => canonicalHost(h.includes(':') && !h.startsWith('[') ? `[${h}]` : h) ?? h.toLowerCase()),
    );
    allowedCache.set(allowedHosts, set);
  }
  return set;
}

/**
 * Null when the Host of a request to a guarded path (the admin API, the status page) is one of this
 * listener's, else its refusal. A missing Host (HTTP/1.0) passes: every browser sends one, so it is no rebinding.
 */
export function hostRefusal(
  req: http.IncomingMessage,
  names: ReadonlySet<string>,
  allowedHosts: readonly string[],
): BrowserRefusal | null {
  const header = req.headers.host;
  if (header === undefined) return null;
  const host = canonicalHost(header);
  if (host !== null && (names.has(host) || allowedSet(allowedHosts).has(host))) return null;
  return {
    status: 421,
    error: `Host ${JSON.stringify(header.slice(0, 100))} is not an address of this admin listener: use one of them or localhost, or name it in admin.allowedHosts`,
  };
}

/**
 * A write must come from this listener's own origin (its status page) or from no browser at all, and
 * any body it has must be declared JSON: a page on another origin can send a form or a text/plain
 * body without asking, never application/json (that takes a CORS preflight, which this listener never
 * grants). Browsers send Origin on every write and Sec-Fetch-Site on every request; clients such as
 * curl and the CLI send neither. Null for a read, or a write that may go on.
 */
export function writeRefusal(req: http.IncomingMessage): BrowserRefusal | null {
  const method = req.method ?? 'GET';
  if (method === 'GET' || method === 'HEAD') return null;
  const host = req.headers.host;
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') {
    return {
      status: 403,
      error: `cross-site admin write refused (Sec-Fetch-Site: ${site.slice(0, 40)}): only this listener's own status page may write from a browser`,
    };
  }
  const origin = req.headers.origin;
  if (origin !== undefined && !sameOrigin(origin, host)) {
    return {
      status: 403,
      error: `cross-origin admin write refused (Origin: ${origin.slice(0, 100)}): only this listener's own status page may write from a browser`,
    };
  }
  if (!hasBody(req)) return null;
  const type = (req.headers['content-type'] ?? '').split(';', 1)[0]!.trim().toLowerCase();
  return type === 'application/json'
    ? null
    : { status: 415, error: 'an admin write with a body needs Content-Type: application/json' };
}

/** Whether the Origin is the scheme, host and port the request was sent to (its Host header). */
function sameOrigin(origin: string, host: string | undefined): boolean {
  if (host === undefined || !URL.canParse(origin)) return false;
  const o = new URL(origin);
  if (o.protocol !== 'http:' && o.protocol !== 'https:') return false;
  // The Host header passed HOST_HEADER above, so this parse reads exactly host[:port].
  return o.host === new URL(`${o.protocol}//${host}`).host;
}

function hasBody(req: http.IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

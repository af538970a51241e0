/** @module The client IP of a request: TCP peer or trusted X-Forwarded-For / Forwarded walk, and its bucket key. */
import ipaddr from 'ipaddr.js';
import { BoundedMap } from './bounded-map.js';
import { lastIndexOfCode } from '../routing/last-index.js';
import { parseIp, type CidrSet, type ParsedIp } from './cidr.js';
import { forwardedForNodes, type ParsedForwarded } from './forwarded.js';

/** Who the client is, as far as IP-based limits and exemptions are concerned. */
export interface ClientIp {
  /** The client's own address: dotted quad for IPv4 (mapped IPv6 folded), RFC 5952 text for IPv6. */
  readonly address: string;
  /** The bucket key: the IPv4 address, or the IPv6 network of `ipv6Prefix` bits, e.g. `2001:db8::/64`. */
  readonly key: string;
  /**
   * Whether `exempt.ips` holds it, found when the address was parsed (the resolver's `exemptIps`);
   * undefined for a client made elsewhere (explain's --ip), which the reader then looks up itself.
   */
  readonly exempt?: boolean | undefined;
}

export interface ClientIpOptions {
  readonly trustedProxies: CidrSet;
  /** IPv6 clients are grouped by this many leading bits (0–128): one customer usually owns a /64. */
  readonly ipv6Prefix: number;
  /** Distinct address strings remembered (parse result + trust); default 10 000. */
  readonly cacheSize?: number;
  /**
   * `exempt.ips`, answered with the parse the resolver does anyway: a flood of distinct addresses then
   * costs one parse each, not a second one in the exempt list's own (smaller) cache.
   */
  readonly exemptIps?: CidrSet | null;
}

/** What the resolver knows about one address string; cached so repeat clients cost a Map lookup. */
export interface Peer {
  /** The address is a trusted proxy: its forwarding headers are believed. */
  readonly trusted: boolean;
  readonly client: ClientIp;
}

/**
 * `(peer, X-Forwarded-For, Forwarded) → ClientIp`. The returned objects are shared and frozen: do not
 * mutate them. `forwardedFor` is the raw header: a string (Node joins repeated headers with `, `) or the
 * list of values in arrival order (`req.headersDistinct`); `forwarded` the raw RFC 7239 header.
 *
 * From a trusted peer, X-Forwarded-For wins when both are present, and `Forwarded` is read only
 * without it. Rack 3 prefers `Forwarded`, but most proxies (nginx, HAProxy, ingress-nginx, cloud load
 * balancers) write X-Forwarded-For and pass a client's `Forwarded` through untouched: preferring it
 * would let a client behind such a proxy pick its own IP. The forwarder drops `Forwarded` whenever
 * X-Forwarded-For decided (see proxy/client-ip-headers.ts), so the upstream reads what was counted.
 */
export interface ClientIpResolver {
  (peer: string | undefined, forwardedFor: string | string[] | undefined, forwarded?: string | undefined): ClientIp;
  /** The TCP peer, resolved once per request: its trust is then read, not recomputed, by every stage. */
  peer(addr: string | undefined): Peer;
  /** The client behind an already resolved peer; `forwarded` may come parsed (once per request, by the request's view). */
  behind(
    peer: Peer,
    forwardedFor: string | string[] | undefined,
    forwarded: string | ParsedForwarded | undefined,
  ): ClientIp;
}

/**
 * A peer we cannot parse (e.g. the socket closed and Node reports no address). All of them share one
 * bucket rather than escaping limits; it is never trusted, so its headers are never believed.
 */
export const UNKNOWN_CLIENT: ClientIp = Object.freeze({ address: '', key: 'unknown' });
const UNKNOWN_PEER: Peer = Object.freeze({ trusted: false, client: UNKNOWN_CLIENT });

/** An X-Forwarded-For entry longer than this is garbage: `[v6 with zone]:port` fits well inside. */
const MAX_ENTRY_LEN = 80;
const PORT = /^\d{1,5}$/;

/**
 * Reduces one X-Forwarded-For element to a bare address: trims whitespace, strips `[…]` and `:port`
 * (`1.2.3.4:80`, `[2001:db8::1]:80`, `[2001:db8::1]`). Returns '' for an empty element (list syntax
 * allows them) and null for anything malformed. A bare IPv6 has several colons and keeps them all.
 */
export function bareForwardedAddress(raw: string): string | null {
  const s = raw.trim();
  if (s.length === 0) return '';
  if (s.length > MAX_ENTRY_LEN) return null;
  if (s.charCodeAt(0) === 0x5b /* [ */) {
    const close = s.indexOf(']');
    if (close === -1) return null;
    const rest = s.slice(close + 1);
    if (rest.length !== 0 && (rest.charCodeAt(0) !== 0x3a /* : */ || !PORT.test(rest.slice(1)))) return null;
    const inner = s.slice(1, close);
    // Brackets only ever wrap IPv6; `[1.2.3.4]` is not a form any proxy emits.
    return inner.indexOf(':') === -1 ? null : inner;
  }
  const colon = s.indexOf(':');
  if (colon !== -1 && colon === lastIndexOfCode(s, 0x3a /* : */)) {
    // Exactly one colon: IPv4 with a port (no IPv6 text has a single colon).
    return PORT.test(s.slice(colon + 1)) ? s.slice(0, colon) : null;
  }
  return s;
}

/** Renders the bucket key of a parsed address. */
function keyOf(ip: ParsedIp, address: string, ipv6Prefix: number): string {
  return ip.kind() === 'ipv4' ? address : v6Network(ip as ipaddr.IPv6, ipv6Prefix);
}

/** The IPv6 network of `prefix` bits that holds `ip`, as `2001:db8::/64`. */
function v6Network(ip: ipaddr.IPv6, prefix: number): string {
  const parts = ip.parts.slice();
  for (let i = 0; i < 8; i++) {
    const keep = Math.min(16, Math.max(0, prefix - i * 16));
    parts[i] = keep === 0 ? 0 : parts[i]! & ((0xffff << (16 - keep)) & 0xffff);
  }
  // RFC 5952 text is the canonical spelling, so `2001:DB8:0:0::1` and `2001:db8::1` share a key.
  return `${new ipaddr.IPv6(parts).toRFC5952String()}/${prefix}`;
}

/**
 * The network that holds a client address, for what is bounded per network rather than per client (a
 * surge trigger's share): `203.0.113.0/24` for IPv4 (mapped IPv6 folded), `2001:db8::/48` for IPv6;
 * null when `addr` is not an address.
 */
export function networkOf(addr: string, ipv4Prefix: number, ipv6Prefix: number): string | null {
  const ip = parseIp(addr);
  if (ip === null) return null;
  if (ip.kind() === 'ipv6') return v6Network(ip as ipaddr.IPv6, ipv6Prefix);
  const o = (ip as ipaddr.IPv4).octets.slice();
  for (let i = 0; i < 4; i++) {
    const keep = Math.min(8, Math.max(0, ipv4Prefix - i * 8));
    o[i] = keep === 0 ? 0 : o[i]! & ((0xff << (8 - keep)) & 0xff);
  }
  return `${o.join('.')}/${ipv4Prefix}`;
}

/** RFC 5952 text without the zone (zones name local interfaces; see parseIp). */
function addressOf(ip: ParsedIp): string {
  if (ip.kind() === 'ipv4') return ip.toString();
  const v6 = ip as ipaddr.IPv6;
  return v6.zoneId === undefined ? v6.toRFC5952String() : new ipaddr.IPv6(v6.parts).toRFC5952String();
}

function checkPrefix(ipv6Prefix: number): void {
  if (!Number.isInteger(ipv6Prefix) || ipv6Prefix < 0 || ipv6Prefix > 128) {
    throw new Error(`ipv6Prefix must be an integer from 0 to 128, got ${ipv6Prefix}`);
  }
}

/**
 * The bucket key for an address typed by a person (admin API: `?key=2001:db8::1`), or null if it is not
 * an address. Same rules as the request path, so the admin sees the bucket the gateway charges.
 */
export function ipBucketKey(addr: string, ipv6Prefix: number): string | null {
  checkPrefix(ipv6Prefix);
  const ip = parseIp(addr);
  return ip === null ? null : keyOf(ip, addressOf(ip), ipv6Prefix);
}

/** What the resolver knows of an address it parsed: trust, its text and key, and whether exempt.ips holds it. */
function parsedPeer(addr: string, ip: ParsedIp, opts: ClientIpOptions): Peer {
  // A dotted quad parseIp accepted is canonical already (no leading zeros): its own text.
  const address = ip.kind() === 'ipv4' && addr.indexOf(':') === -1 ? addr : addressOf(ip);
  const exemptIps = opts.exemptIps ?? null;
  return Object.freeze({
    trusted: opts.trustedProxies.containsIp(ip),
    client: Object.freeze({
      address,
      key: keyOf(ip, address, opts.ipv6Prefix),
      exempt: exemptIps === null ? undefined : exemptIps.containsIp(ip),
    }),
  });
}

/** Parses once per distinct string, then answers from a bounded cache (the hot path's common case). */
export function createClientIpResolver(opts: ClientIpOptions): ClientIpResolver {
  checkPrefix(opts.ipv6Prefix);
  const cache = new BoundedMap<string, Peer | null>(opts.cacheSize ?? 10_000);

  function lookup(addr: string): Peer | null {
    const hit = cache.get(addr);
    if (hit !== undefined) return hit;
    const ip = parseIp(addr);
    const known = ip === null ? null : parsedPeer(addr, ip, opts);
    cache.set(addr, known);
    return known;
  }

  /** The RFC 7239 walk: the same rules as X-Forwarded-For's, over the `for=` nodes. */
  function walkForwarded(direct: Peer, forwarded: string | ParsedForwarded): ClientIp {
    const nodes = typeof forwarded === 'string' ? forwardedForNodes(forwarded) : forwarded.forwardedFor();
    if (nodes === null) return direct.client;
    let current = direct;
    for (let i = nodes.length - 1; i >= 0; i--) {
      const node = nodes[i]!;
      const bare = node === null ? null : bareForwardedAddress(node);
      // `unknown`, an obfuscated `_name` or port, `for=""` or garbage: stop at the hop that passed it.
      const entry = bare === null || bare === '' ? null : lookup(bare);
      if (entry === null) return current.client;
      if (!entry.trusted) return entry.client;
      current = entry;
    }
    return current.client;
  }

  function peerOf(addr: string | undefined): Peer {
    return (addr === undefined ? null : lookup(addr)) ?? UNKNOWN_PEER;
  }

  function behind(
    direct: Peer,
    forwardedFor: string | string[] | undefined,
    forwarded: string | ParsedForwarded | undefined,
  ): ClientIp {
    // Security: X-Forwarded-For and Forwarded are written by whoever sent the request. Only a trusted
    // proxy's word counts; from anyone else it is a spoof attempt (a client picking a fresh bucket per
    // request) and is ignored entirely, not even parsed.
    if (!direct.trusted) return direct.client;
    if (forwardedFor === undefined) return forwarded === undefined ? direct.client : walkForwarded(direct, forwarded);

    // Walk right to left: each trusted proxy appended the address it received the request from, so the
    // right-most untrusted entry is the first hop no trusted party can vouch past. Entries left of it
    // were written by the client and are never believed.
    let current = direct;
    const values = typeof forwardedFor === 'string' ? 1 : forwardedFor.length;
    for (let v = values - 1; v >= 0; v--) {
      const value = typeof forwardedFor === 'string' ? forwardedFor : forwardedFor[v]!;
      let end = value.length;
      while (end >= 0) {
        const comma = end === 0 ? -1 : lastIndexOfCode(value, 0x2c /* , */, end - 1);
        const bare = bareForwardedAddress(value.slice(comma + 1, end));
        end = comma; // -1 after the left-most element: the loop ends
        if (bare === '') continue;
        const entry = bare === null ? null : lookup(bare);
        // Security: garbage ends the walk at the trusted hop that passed it on. Skipping it would carry
        // the walk on into entries the client wrote itself, letting it choose its key; and garbage
        // itself is never a key (a fresh string per request would be a fresh bucket).
        if (entry === null) return current.client;
        if (!entry.trusted) return entry.client;
        current = entry;
      }
    }
    // Every hop is trusted (an internal client): the left-most is the closest to the origin we know.
    return current.client;
  }

  const resolve = (peer: string | undefined, xff: string | string[] | undefined, forwarded?: string): ClientIp =>
    behind(peerOf(peer), xff, forwarded);
  return Object.assign(resolve, { peer: peerOf, behind });
}

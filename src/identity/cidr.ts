/** @module Strict IP parsing and compiled CIDR sets (trusted proxies, exempt IPs), parsed once at load. */
import ipaddr from 'ipaddr.js';
import { BoundedMap } from './bounded-map.js';

/** A parsed address: IPv4, or IPv6 that is not IPv4-mapped (mapped addresses are folded to IPv4). */
export type ParsedIp = ipaddr.IPv4 | ipaddr.IPv6;

/** A set of IP ranges compiled from config entries. */
export interface CidrSet {
  /** True when `addr` (an IPv4 or IPv6 address, mapped IPv4 included) lies in a range. False for garbage. */
  contains(addr: string): boolean;
  /** The same test on an address already parsed by {@link parseIp}. */
  containsIp(ip: ParsedIp): boolean;
  /** The entries as written, for `rategate check` and logs. */
  readonly entries: readonly string[];
  /** True when the set has no range at all, so callers can skip the lookup. */
  readonly empty: boolean;
}

const ALIASES: Readonly<Record<string, readonly string[]>> = {
  loopback: ['127.0.0.0/8', '::1/128'],
  private: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
};

// Only canonical dotted-decimal IPv4 is accepted. ipaddr.js (like inet_aton) also reads `127.1`,
// `0x7f.0.0.1` and octal `0177.0.0.1`; other software in the chain may read those differently, and an
// address that two components understand differently is how trust checks get bypassed.
const FOUR_PART_DECIMAL = /^(?:0|[1-9]\d{0,2})(?:\.(?:0|[1-9]\d{0,2})){3}$/;
// Cheap pre-filter so obvious garbage (hostnames, `unknown`, RFC 7239 `_obfuscated`) never reaches the
// exception-throwing parser.
const IPV6_CHARS = /^[0-9A-Fa-f:.]+$/;
/** Longest textual IPv6 without zone: `ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255` is 45 chars. */
const MAX_ADDR_LEN = 45;

/**
 * Parses one bare address (no brackets, no port, no prefix) strictly. IPv4-mapped IPv6 (`::ffff:1.2.3.4`,
 * what Node reports for IPv4 peers on a dual-stack socket) is folded to IPv4 so both spellings of one
 * client are one client. An IPv6 zone (`fe80::1%eth0`) is dropped: it names a local interface, not a host.
 * Returns null for anything else; never throws.
 */
export function parseIp(addr: string): ParsedIp | null {
  if (addr.indexOf(':') === -1) {
    if (addr.length > 15 || !FOUR_PART_DECIMAL.test(addr)) return null;
    return dottedQuad(addr);
  }
  const zone = addr.indexOf('%');
  const bare = zone === -1 ? addr : addr.slice(0, zone);
  if (bare.length > MAX_ADDR_LEN || !IPV6_CHARS.test(bare)) return null;
  if (bare.indexOf('.') !== -1) {
    // The embedded IPv4 tail gets the same strictness as a plain IPv4 address.
    if (!FOUR_PART_DECIMAL.test(bare.slice(bare.lastIndexOf(':') + 1))) return null;
  }
  let ip: ipaddr.IPv6;
  try {
    ip = ipaddr.IPv6.parse(bare);
  } catch {
    return null;
  }
  return ip.isIPv4MappedAddress() ? ip.toIPv4Address() : ip;
}

/**
 * The address of a string FOUR_PART_DECIMAL accepted, or null when an octet is above 255. Read here
 * rather than by ipaddr.js's parser, which tries its other IPv4 forms with regular expressions: a new
 * client's address is parsed once per distinct string, which with many clients is once per request.
 */
function dottedQuad(addr: string): ipaddr.IPv4 | null {
  const octets = [0, 0, 0, 0];
  let k = 0;
  for (let i = 0; i < addr.length; i++) {
    const c = addr.charCodeAt(i);
    if (c === 0x2e /* . */) k++;
    else if ((octets[k] = octets[k]! * 10 + c - 0x30) > 255) return null;
  }
  return new ipaddr.IPv4(octets);
}

type Range = [ParsedIp, number];

const MAPPED_PREFIX = ipaddr.IPv6.parse('::ffff:0:0');
const ANY_V4: Range = [ipaddr.IPv4.parse('0.0.0.0'), 0];

/**
 * Turns one config entry into ranges; mapped IPv6 ranges become the IPv4 ranges they denote. Returns
 * false, adding nothing, for an entry that is not an address, ADDR/BITS or alias.
 */
function compileEntry(entry: string, out4: Range[], out6: Range[]): boolean {
  const alias = ALIASES[entry.trim().toLowerCase()];
  if (alias !== undefined) {
    for (const e of alias) compileEntry(e, out4, out6);
    return true;
  }
  const text = entry.trim();
  const slash = text.indexOf('/');
  const addrText = slash === -1 ? text : text.slice(0, slash);
  // Parse the prefix ourselves, not with ipaddr.parseCIDR, to keep the strict address rules above.
  const bitsText = slash === -1 ? undefined : text.slice(slash + 1);
  if (bitsText !== undefined && !/^\d{1,3}$/.test(bitsText)) return false;
  const isV6Text = addrText.indexOf(':') !== -1;
  const maxBits = isV6Text ? 128 : 32;
  const bits = bitsText === undefined ? maxBits : Number(bitsText);
  if (bits > maxBits || addrText.indexOf('%') !== -1) return false;
  const ip = parseIp(addrText);
  if (ip === null) return false;

  if (ip.kind() === 'ipv4') {
    if (!isV6Text) {
      out4.push([ip, bits]);
    } else if (bits >= 96) {
      // `::ffff:10.0.0.0/104` is 10.0.0.0/8: we compare mapped peers in their IPv4 form.
      out4.push([ip, bits - 96]);
    } else {
      // A wider IPv6 range that includes the mapped space covers every IPv4 peer.
      out6.push([(ip as ipaddr.IPv4).toIPv4MappedAddress(), bits]);
      out4.push(ANY_V4);
    }
    return true;
  }
  out6.push([ip, bits]);
  // `::/0` and the like also hold ::ffff:0:0/96; mapped peers are seen as IPv4, so say so explicitly,
  // else "trust everything" written as `::/0` would silently not trust IPv4 clients of a dual-stack socket.
  if (bits <= 96 && MAPPED_PREFIX.match(ip, bits)) out4.push(ANY_V4);
  return true;
}

/**
 * Whether an entry is valid in a CIDR list: an address or ADDR/BITS, and also `loopback` / `private`
 * when `aliases` is set. The config validator asks this, so it accepts exactly what compileCidrs does.
 */
export function isCidrEntry(entry: string, aliases: boolean): boolean {
  if (!aliases && ALIASES[entry.trim().toLowerCase()] !== undefined) return false;
  return compileEntry(entry, [], []);
}

function invalid(entry: string): Error {
  return new Error(`invalid IP address or CIDR range "${entry}" (expected an address, ADDR/BITS, loopback or private)`);
}

/** How many distinct address strings `contains` remembers; misses only cost a parse. */
const CONTAINS_CACHE_SIZE = 4096;

/**
 * Compiles entries (addresses, CIDRs, the aliases `loopback` and `private`) once. Throws an Error naming
 * the first invalid entry; the config loader validates earlier, this is the backstop.
 * A CIDR with host bits set (`10.0.0.1/8`) is accepted as its network, as nginx and Envoy do.
 */
export function compileCidrs(entries: readonly string[]): CidrSet {
  const v4: Range[] = [];
  const v6: Range[] = [];
  for (const entry of entries) if (!compileEntry(entry, v4, v6)) throw invalid(entry);
  const empty = v4.length === 0 && v6.length === 0;
  const cache = new BoundedMap<string, boolean>(CONTAINS_CACHE_SIZE);

  function containsIp(ip: ParsedIp): boolean {
    const ranges = ip.kind() === 'ipv4' ? v4 : v6;
    for (let i = 0; i < ranges.length; i++) {
      const r = ranges[i]!;
      if (ip.match(r)) return true;
    }
    return false;
  }

  return {
    entries: Object.freeze([...entries]),
    empty,
    containsIp,
    contains(addr: string): boolean {
      if (empty) return false;
      const hit = cache.get(addr);
      if (hit !== undefined) return hit;
      const ip = parseIp(addr);
      const result = ip !== null && containsIp(ip);
      // Bound the key size too: an unparsable multi-kilobyte string must not be pinned in the cache.
      if (addr.length <= 64) cache.set(addr, result);
      return result;
    },
  };
}

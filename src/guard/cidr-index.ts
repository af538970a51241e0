/**
 * @module The runtime blocks or exemptions as a CIDR set that changes one entry at a time: adding or
 * removing an entry is O(1), and a lookup costs one hash probe per distinct prefix length in use (a
 * handful: /32, /24, /64 …), whatever the number of entries. compileCidrs (identity/cidr.ts) scans its
 * ranges one by one and is rebuilt whole: right for a config list, wrong for 300,000 runtime blocks.
 */
import ipaddr from 'ipaddr.js';
import { parseIp, type CidrSet, type ParsedIp } from '../identity/index.js';

/** One range an entry stands for: IPv4 as a 32-bit network, IPv6 as the hex of its masked bytes. */
type Range =
  | { readonly v4: true; readonly bits: number; readonly net: number }
  | { readonly v4: false; readonly bits: number; readonly net: string };

const MAPPED_PREFIX = ipaddr.IPv6.parse('::ffff:0:0');

function mask4(bits: number): number {
  return bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
}

function v4Int(bytes: readonly number[]): number {
  return ((bytes[0]! << 24) | (bytes[1]! << 16) | (bytes[2]! << 8) | bytes[3]!) >>> 0;
}

function v6Net(bytes: readonly number[], bits: number): string {
  let s = '';
  for (let i = 0; i < 16; i++) {
    const keep = Math.min(8, Math.max(0, bits - i * 8));
    const b = keep === 0 ? 0 : bytes[i]! & ((0xff << (8 - keep)) & 0xff);
    s += (b < 16 ? '0' : '') + b.toString(16);
  }
  return s;
}

/**
 * The ranges of one entry (an address or ADDR/BITS, as the admin API accepts it), read as
 * compileCidrs reads it: IPv4-mapped IPv6 ranges become the IPv4 ranges they denote, and an IPv6 range
 * wide enough to hold the mapped space also holds every IPv4 peer. Null for anything else.
 */
export function rangesOf(entry: string): Range[] | null {
  const text = entry.trim();
  const slash = text.indexOf('/');
  const addrText = slash === -1 ? text : text.slice(0, slash);
  const bitsText = slash === -1 ? undefined : text.slice(slash + 1);
  if (bitsText !== undefined && !/^\d{1,3}$/.test(bitsText)) return null;
  const isV6Text = addrText.includes(':');
  const bits = bitsText === undefined ? (isV6Text ? 128 : 32) : Number(bitsText);
  if (bits > (isV6Text ? 128 : 32) || addrText.includes('%')) return null;
  // The usual entry, a canonical IPv4 address or network, without the general parser.
  const quad = isV6Text ? -1 : fastV4(addrText);
  if (quad >= 0) return [{ v4: true, bits, net: (quad & mask4(bits)) >>> 0 }];
  const ip = parseIp(addrText);
  if (ip === null) return null;
  const anyV4: Range = { v4: true, bits: 0, net: 0 };
  if (ip.kind() === 'ipv4') {
    const b = ip.toByteArray();
    if (!isV6Text) return [{ v4: true, bits, net: (v4Int(b) & mask4(bits)) >>> 0 }];
    if (bits >= 96) return [{ v4: true, bits: bits - 96, net: (v4Int(b) & mask4(bits - 96)) >>> 0 }];
    return [{ v4: false, bits, net: v6Net((ip as ipaddr.IPv4).toIPv4MappedAddress().toByteArray(), bits) }, anyV4];
  }
  const out: Range[] = [{ v4: false, bits, net: v6Net(ip.toByteArray(), bits) }];
  if (bits <= 96 && MAPPED_PREFIX.match(ip, bits)) out.push(anyV4);
  return out;
}

/** `a.b.c.d` in canonical form → its 32-bit value, or -1 (then the address goes through parseIp). */
function fastV4(addr: string): number {
  const n = addr.length;
  if (n < 7 || n > 15) return -1;
  let value = 0;
  let part = 0;
  let digits = 0;
  let parts = 0;
  for (let i = 0; i <= n; i++) {
    const c = i === n ? 0x2e : addr.charCodeAt(i);
    if (c === 0x2e) {
      if (digits === 0 || part > 255 || parts === 4) return -1;
      value = value * 256 + part;
      parts++;
      part = 0;
      digits = 0;
    } else if (c >= 0x30 && c <= 0x39) {
      if (digits > 0 && part === 0) return -1; // a leading zero: not canonical
      part = part * 10 + (c - 0x30);
      if (++digits > 3) return -1;
    } else return -1;
  }
  return parts === 4 ? value : -1;
}

/** Prefix length → network → the entries (ids) that name it. */
class RangeTable<K> {
  readonly byBits = new Map<number, Map<K, string[]>>();
  /** The prefix lengths in use, longest first. */
  lengths: number[] = [];

  add(bits: number, net: K, id: string): void {
    let nets = this.byBits.get(bits);
    if (nets === undefined) {
      this.byBits.set(bits, (nets = new Map()));
      this.lengths = [...this.byBits.keys()].sort((a, b) => b - a);
    }
    const ids = nets.get(net);
    if (ids === undefined) nets.set(net, [id]);
    else if (!ids.includes(id)) ids.push(id);
  }

  delete(bits: number, net: K, id: string): void {
    const nets = this.byBits.get(bits);
    const ids = nets?.get(net);
    if (nets === undefined || ids === undefined) return;
    const i = ids.indexOf(id);
    if (i >= 0) ids.splice(i, 1);
    if (ids.length > 0) return;
    nets.delete(net);
    if (nets.size > 0) return;
    this.byBits.delete(bits);
    this.lengths = [...this.byBits.keys()].sort((a, b) => b - a);
  }
}

export class CidrIndex implements CidrSet {
  /** Entry (as written) → its expiry (epoch ms, Infinity: none) and ranges. */
  private readonly byId = new Map<string, { expiresAt: number; ranges: Range[] }>();
  private readonly v4 = new RangeTable<number>();
  private readonly v6 = new RangeTable<string>();

  /** `now` is read only when a lookup hits: an entry past its expiry no longer counts, swept or not. */
  constructor(private readonly now: () => number) {}

  get size(): number {
    return this.byId.size;
  }

  get empty(): boolean {
    return this.byId.size === 0;
  }

  /** The entries as written (for the admin list and the gauges; built on demand). */
  get entries(): readonly string[] {
    return [...this.byId.keys()];
  }

  /** Adds or replaces an entry; false (nothing added) when it is not an address or CIDR. */
  set(id: string, expiresAt: number): boolean {
    const had = this.byId.get(id);
    if (had !== undefined) {
      had.expiresAt = expiresAt;
      return true;
    }
    const ranges = rangesOf(id);
    if (ranges === null) return false;
    this.byId.set(id, { expiresAt, ranges });
    for (const r of ranges) {
      if (r.v4) this.v4.add(r.bits, r.net, id);
      else this.v6.add(r.bits, r.net, id);
    }
    return true;
  }

  delete(id: string): void {
    const had = this.byId.get(id);
    if (had === undefined) return;
    this.byId.delete(id);
    for (const r of had.ranges) {
      if (r.v4) this.v4.delete(r.bits, r.net, id);
      else this.v6.delete(r.bits, r.net, id);
    }
  }

  contains(addr: string): boolean {
    if (this.byId.size === 0) return false;
    const v4 = fastV4(addr);
    if (v4 >= 0) return this.hit4(v4);
    const ip = parseIp(addr);
    return ip !== null && this.containsIp(ip);
  }

  containsIp(ip: ParsedIp): boolean {
    const bytes = ip.toByteArray();
    if (ip.kind() === 'ipv4') return this.hit4(v4Int(bytes));
    for (const bits of this.v6.lengths) {
      const ids = this.v6.byBits.get(bits)!.get(v6Net(bytes, bits));
      if (ids !== undefined && this.live(ids)) return true;
    }
    return false;
  }

  private hit4(ip: number): boolean {
    for (const bits of this.v4.lengths) {
      const ids = this.v4.byBits.get(bits)!.get((ip & mask4(bits)) >>> 0);
      if (ids !== undefined && this.live(ids)) return true;
    }
    return false;
  }

  private live(ids: readonly string[]): boolean {
    const t = this.now();
    for (const id of ids) if (this.byId.get(id)!.expiresAt > t) return true;
    return false;
  }
}

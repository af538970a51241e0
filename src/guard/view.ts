/**
 * @module The local picture of the runtime blocks, exemptions and bans that the request path consults,
 * changed one entry at a time as the store's change log is applied (never rebuilt per change): putting
 * or removing an entry is O(1) (O(log n) for its expiry), a ban lookup O(1), a block lookup one probe per
 * prefix length in use (cidr-index.ts). Entries past their expiry stop counting at once and are swept
 * from memory by `prune`, never per request.
 */
import { CidrIndex } from './cidr-index.js';
import { ExpiryHeap } from './expiry-heap.js';
import type { EntryKind, GuardEntry } from './entry.js';

export interface BanHit {
  readonly ban: string;
  readonly expiresAt: number;
}

/** The store's name of an entry: `<kind>|<id>` (a hash field in Redis). */
export function fieldOf(kind: EntryKind, id: string): string {
  return `${kind}|${id}`;
}

/** `<ban name>/<key>` → its two parts. */
export function splitBanId(id: string): { ban: string; key: string } {
  const slash = id.indexOf('/');
  return { ban: id.slice(0, slash), key: id.slice(slash + 1) };
}

function expiryOf(e: GuardEntry): number {
  return e.expiresAt ?? Infinity;
}

export class GuardView {
  private readonly byField = new Map<string, GuardEntry>();
  /** Runtime blocks and exemptions (IPs and CIDRs). */
  readonly blocks: CidrIndex;
  readonly exempts: CidrIndex;
  /** Ban name → key → expiry, each ban's keys in the order their bans started. */
  readonly byBan = new Map<string, Map<string, number>>();
  /** `ip:<key>` → a ban holding it: an IP ban refuses every route. */
  readonly ipBans = new Map<string, BanHit>();
  private readonly expiries = new ExpiryHeap();

  constructor(private readonly now: () => number) {
    this.blocks = new CidrIndex(now);
    this.exempts = new CidrIndex(now);
  }

  /** Entries held, expired ones not yet pruned included. */
  get size(): number {
    return this.byField.size;
  }

  get(field: string): GuardEntry | undefined {
    return this.byField.get(field);
  }

  /** Adds or replaces an entry (a block or exemption that is not an address or CIDR is ignored). */
  put(e: GuardEntry): void {
    const field = fieldOf(e.kind, e.id);
    if (this.byField.has(field)) this.unindex(this.byField.get(field)!);
    const until = expiryOf(e);
    if (e.kind === 'ban') {
      const { ban, key } = splitBanId(e.id);
      let keys = this.byBan.get(ban);
      if (keys === undefined) this.byBan.set(ban, (keys = new Map()));
      keys.set(key, until);
      if (key.startsWith('ip:')) this.ipBans.set(key, { ban, expiresAt: until });
    } else if (e.kind === 'surge') {
      // Looked up by its field alone (surge/surges.ts).
    } else if (!(e.kind === 'block' ? this.blocks : this.exempts).set(e.id, until)) {
      this.byField.delete(field);
      return;
    }
    this.byField.set(field, e);
    if (until !== Infinity) this.expiries.push(until, field);
    // Replaced and removed entries leave their expiry behind: rebuilt once they outnumber the live ones.
    if (this.expiries.size > 2 * this.byField.size + 1024) this.rebuildExpiries();
  }

  /** Removes an entry; the entry removed, or undefined. */
  remove(field: string): GuardEntry | undefined {
    const e = this.byField.get(field);
    if (e === undefined) return undefined;
    this.byField.delete(field);
    this.unindex(e);
    return e;
  }

  /** Drops what has expired by `now` from memory (lookups already ignore it). */
  prune(now: number): void {
    for (let t = this.expiries.peek(); t <= now; t = this.expiries.peek()) {
      const field = this.expiries.pop();
      const e = this.byField.get(field);
      if (e !== undefined && expiryOf(e) <= now) this.remove(field);
    }
  }

  /** Every live entry, for the admin lists and for writing the set back to a store that lost it. */
  live(now: number): GuardEntry[] {
    const out: GuardEntry[] = [];
    for (const e of this.byField.values()) if (expiryOf(e) > now) out.push(e);
    return out;
  }

  /** Bans held for `ban` (expired ones not yet pruned included). */
  banCount(ban: string): number {
    return this.byBan.get(ban)?.size ?? 0;
  }

  /** The key of `ban`'s oldest ban (the first started), or undefined. */
  oldestBan(ban: string): string | undefined {
    return this.byBan.get(ban)?.keys().next().value;
  }

  private unindex(e: GuardEntry): void {
    if (e.kind === 'block') return this.blocks.delete(e.id);
    if (e.kind === 'exempt') return this.exempts.delete(e.id);
    if (e.kind === 'surge') return;
    const { ban, key } = splitBanId(e.id);
    const keys = this.byBan.get(ban);
    keys?.delete(key);
    if (keys?.size === 0) this.byBan.delete(ban);
    if (this.ipBans.get(key)?.ban !== ban) return;
    this.ipBans.delete(key);
    // Another ban may hold the same IP: it still refuses it (a handful of ban names to look at).
    for (const [other, held] of this.byBan) {
      const until = held.get(key);
      if (until !== undefined) return void this.ipBans.set(key, { ban: other, expiresAt: until });
    }
  }

  private rebuildExpiries(): void {
    this.expiries.clear();
    for (const [field, e] of this.byField) if (e.expiresAt !== null) this.expiries.push(e.expiresAt, field);
  }
}

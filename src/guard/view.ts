/**
 * @module The local, read-only picture of the runtime blocks, exemptions and bans that the request path
 * consults: rebuilt from the store's entries when they change (never per request), looked up in O(1)
 * (bans) or one CIDR walk (blocks), expiring on time without a store call.
 */
import { compileCidrs, type CidrSet } from '../identity/index.js';
import { isLive, type GuardEntry } from './state.js';

export interface BanHit {
  readonly ban: string;
  readonly expiresAt: number;
}

export class GuardView {
  /** Runtime blocks / exemptions (IPs and CIDRs); null when there is none, so the lookup is skipped. */
  readonly blocks: CidrSet | null;
  readonly exempts: CidrSet | null;
  /** Ban name → key → expiry. */
  readonly byBan: ReadonlyMap<string, ReadonlyMap<string, number>>;
  /** `ip:<key>` → the ban holding it: an IP ban refuses every route. */
  readonly ipBans: ReadonlyMap<string, BanHit>;
  /** The earliest expiry of a block or exemption: the view is rebuilt then (bans expire per lookup). */
  readonly nextExpiry: number;

  constructor(
    readonly entries: readonly GuardEntry[],
    now: number,
  ) {
    const blocks: string[] = [];
    const exempts: string[] = [];
    const byBan = new Map<string, Map<string, number>>();
    const ipBans = new Map<string, BanHit>();
    let next = Infinity;
    for (const e of entries) {
      if (!isLive(e, now)) continue;
      if (e.kind === 'ban') {
        const slash = e.id.indexOf('/');
        const ban = e.id.slice(0, slash);
        const key = e.id.slice(slash + 1);
        const expiresAt = e.expiresAt ?? Infinity;
        let keys = byBan.get(ban);
        if (keys === undefined) byBan.set(ban, (keys = new Map()));
        keys.set(key, expiresAt);
        if (key.startsWith('ip:')) ipBans.set(key, { ban, expiresAt });
        continue;
      }
      (e.kind === 'block' ? blocks : exempts).push(e.id);
      if (e.expiresAt !== null && e.expiresAt < next) next = e.expiresAt;
    }
    this.blocks = blocks.length > 0 ? compileCidrs(blocks) : null;
    this.exempts = exempts.length > 0 ? compileCidrs(exempts) : null;
    this.byBan = byBan;
    this.ipBans = ipBans;
    this.nextExpiry = next;
  }

  /** Live bans of a ban name (for the gauge). */
  activeBans(ban: string, now: number): number {
    let n = 0;
    for (const until of this.byBan.get(ban)?.values() ?? []) if (until > now) n++;
    return n;
  }
}

export const EMPTY_VIEW = new GuardView([], 0);

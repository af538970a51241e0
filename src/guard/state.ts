/**
 * @module Where runtime blocks, exemptions, bans, ban counters and in-flight leases live: the contract,
 * and its in-process form for the memory store (local to the process). redis-state.ts shares them
 * between replicas.
 */

export type EntryKind = 'block' | 'exempt' | 'ban';

/** One runtime block, exemption or ban. Times are epoch ms. */
export interface GuardEntry {
  readonly kind: EntryKind;
  /** block/exempt: the IP or CIDR as given; ban: `<ban name>/<key>`. */
  readonly id: string;
  readonly reason: string;
  readonly createdAt: number;
  /** null: until removed (runtime blocks without `for`). */
  readonly expiresAt: number | null;
}

export interface BanCount {
  /** `<ban name>/<key>`: the ban entry's id. */
  readonly id: string;
  readonly limit: number;
  readonly periodMs: number;
  readonly banMs: number;
  readonly reason: string;
}

export interface GuardState {
  /** `memory` (this process only) or `shared` (every replica on the same store). */
  readonly scope: 'memory' | 'shared';
  /** Every live entry (expired ones are dropped). */
  list(): Promise<GuardEntry[]>;
  put(entry: GuardEntry): Promise<void>;
  /** True when there was such an entry. */
  remove(kind: EntryKind, id: string): Promise<boolean>;
  /** Counts one event for a ban; returns the new ban entry when this event started it, else null. */
  countBan(c: BanCount, now: number): Promise<GuardEntry | null>;
  /** Takes one of `max` slots of `key` for `leaseMs`; a lease id, or null when all are taken. */
  acquire(key: string, max: number, leaseMs: number): Promise<string | null>;
  release(key: string, lease: string): Promise<void>;
  /** Extends the leases still held (called periodically while their requests run). */
  renew(leases: ReadonlyMap<string, string>, leaseMs: number): Promise<void>;
  /** Called (on this replica) when the entries may have changed: by this process, or another replica. */
  onChange(listener: () => void): void;
  close(): Promise<void>;
}

export function isLive(e: GuardEntry, now: number): boolean {
  return e.expiresAt === null || e.expiresAt > now;
}

/** The memory store's state: this process only (the start-up line says so). */
export class MemoryGuardState implements GuardState {
  readonly scope = 'memory' as const;
  private readonly entries = new Map<string, GuardEntry>();
  private readonly counts = new Map<string, { n: number; until: number }>();
  private readonly slots = new Map<string, Map<string, number>>();
  private readonly listeners: (() => void)[] = [];
  private seq = 0;

  constructor(private readonly now: () => number = Date.now) {}

  async list(): Promise<GuardEntry[]> {
    const t = this.now();
    const live: GuardEntry[] = [];
    for (const [k, e] of this.entries) {
      if (isLive(e, t)) live.push(e);
      else this.entries.delete(k);
    }
    return live;
  }

  async put(entry: GuardEntry): Promise<void> {
    this.entries.set(`${entry.kind}|${entry.id}`, entry);
    this.changed();
  }

  async remove(kind: EntryKind, id: string): Promise<boolean> {
    const had = this.entries.delete(`${kind}|${id}`);
    if (had) this.changed();
    return had;
  }

  async countBan(c: BanCount, now: number): Promise<GuardEntry | null> {
    const existing = this.entries.get(`ban|${c.id}`);
    if (existing !== undefined && isLive(existing, now)) return null;
    let n = this.counts.get(c.id);
    if (n === undefined || n.until <= now) {
      // Bounded: stale counters go whenever the map grows past a size worth sweeping.
      if (this.counts.size >= 100_000) for (const [k, v] of this.counts) if (v.until <= now) this.counts.delete(k);
      n = { n: 0, until: now + c.periodMs };
      this.counts.set(c.id, n);
    }
    if (++n.n < c.limit) return null;
    this.counts.delete(c.id);
    const entry: GuardEntry = { kind: 'ban', id: c.id, reason: c.reason, createdAt: now, expiresAt: now + c.banMs };
    await this.put(entry);
    return entry;
  }

  async acquire(key: string, max: number, leaseMs: number): Promise<string | null> {
    const t = this.now();
    let held = this.slots.get(key);
    if (held === undefined) this.slots.set(key, (held = new Map()));
    for (const [id, until] of held) if (until <= t) held.delete(id);
    if (held.size >= max) return null;
    const id = String(++this.seq);
    held.set(id, t + leaseMs);
    return id;
  }

  async release(key: string, lease: string): Promise<void> {
    const held = this.slots.get(key);
    if (held === undefined) return;
    held.delete(lease);
    if (held.size === 0) this.slots.delete(key);
  }

  async renew(leases: ReadonlyMap<string, string>, leaseMs: number): Promise<void> {
    const until = this.now() + leaseMs;
    for (const [lease, key] of leases) {
      const held = this.slots.get(key);
      if (held?.has(lease)) held.set(lease, until);
    }
  }

  onChange(listener: () => void): void {
    this.listeners.push(listener);
  }

  async close(): Promise<void> {}

  private changed(): void {
    for (const l of this.listeners) l();
  }
}

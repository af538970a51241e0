/**
 * @module Where runtime blocks, exemptions, bans, ban counters and in-flight leases live: the contract,
 * and its in-process form for the memory store (local to the process). redis-state.ts shares them
 * between replicas. Either way a state keeps a local picture (view.ts) that the request path reads, and
 * changes it one entry at a time.
 */
import { isLive, type EntryKind, type GuardEntry } from './entry.js';
import { fieldOf, GuardView, splitBanId } from './view.js';

export interface BanCount {
  /** `<ban name>/<key>`: the ban entry's id. */
  readonly id: string;
  readonly limit: number;
  readonly periodMs: number;
  readonly banMs: number;
  readonly reason: string;
  /** Live bans this ban name may hold: a new one beyond it ends the oldest. */
  readonly maxActive: number;
}

/** The ban entry a count that reached its limit starts at `now`: the same record on every state. */
export function banEntry(c: BanCount, now: number): GuardEntry {
  return {
    kind: 'ban',
    id: c.id,
    reason: c.reason,
    createdAt: now,
    expiresAt: now + c.banMs,
    who: `ban ${splitBanId(c.id).ban}`,
  };
}

/** A ban that a count started, and the bans of the same name that the cap ended to make room (ids). */
export interface BanStarted {
  readonly entry: GuardEntry;
  readonly dropped: readonly string[];
}

/** What a shared state tells the gateway about the store's copy (for its log and metrics). */
export interface GuardStateEvents {
  /**
   * The store had lost entries (flushed, restarted empty, failed over to a replica that had not synced):
   * this replica, holding `held`, wrote back the `written` the store lacked.
   */
  restored(written: number, held: number, why: string): void;
  /** The whole set was read again (at start, or after falling behind the change log). */
  resynced(entries: number): void;
}

export interface GuardState {
  /** `memory` (this process only) or `shared` (every replica on the same store). */
  readonly scope: 'memory' | 'shared';
  /** The local picture the request path reads; kept current by this state (replaced whole only by a resync). */
  readonly view: GuardView;
  events: GuardStateEvents | null;
  /** Brings the local picture up to the store now. */
  sync(): Promise<void>;
  /** Writes an entry; applied to the local picture before it resolves. */
  put(entry: GuardEntry): Promise<void>;
  /** Removes an entry; the entry removed, or null when there was none. */
  remove(kind: EntryKind, id: string): Promise<GuardEntry | null>;
  /** Counts one event for a ban; the ban this event started (and what the cap ended), else null. */
  countBan(c: BanCount, now: number): Promise<BanStarted | null>;
  /** Takes one of `max` slots of `key` for `leaseMs`; a lease id, or null when all are taken. */
  acquire(key: string, max: number, leaseMs: number): Promise<string | null>;
  release(key: string, lease: string): Promise<void>;
  /** Extends the leases still held (called periodically while their requests run). */
  renew(leases: ReadonlyMap<string, string>, leaseMs: number): Promise<void>;
  /**
   * Whether changes made elsewhere must be followed continuously (ban rules are configured). Without
   * that, and with no entry held, a shared state keeps no timer and is woken by the store instead.
   */
  follow(on: boolean): void;
  close(): Promise<void>;
}

/** Ends the oldest bans of `ban` beyond `max` in `view`; the ids of the live ones ended. */
export function capBans(view: GuardView, ban: string, max: number, now: number): string[] {
  const dropped: string[] = [];
  while (view.banCount(ban) > max) {
    const id = `${ban}/${view.oldestBan(ban)!}`;
    const e = view.remove(fieldOf('ban', id));
    if (e !== undefined && isLive(e, now)) dropped.push(id);
  }
  return dropped;
}

/** The memory store's state: this process only (the start-up line says so). Its local picture is the state itself. */
export class MemoryGuardState implements GuardState {
  readonly scope = 'memory' as const;
  readonly view: GuardView;
  events: GuardStateEvents | null = null;
  private readonly counts = new Map<string, { n: number; until: number }>();
  private readonly slots = new Map<string, Map<string, number>>();
  private seq = 0;

  constructor(private readonly now: () => number = Date.now) {
    this.view = new GuardView(now);
  }

  sync(): Promise<void> {
    this.view.prune(this.now());
    return Promise.resolve();
  }

  put(entry: GuardEntry): Promise<void> {
    this.view.prune(this.now());
    this.view.put(entry);
    return Promise.resolve();
  }

  remove(kind: EntryKind, id: string): Promise<GuardEntry | null> {
    this.view.prune(this.now());
    return Promise.resolve(this.view.remove(fieldOf(kind, id)) ?? null);
  }

  countBan(c: BanCount, now: number): Promise<BanStarted | null> {
    const existing = this.view.get(fieldOf('ban', c.id));
    if (existing !== undefined && isLive(existing, now)) return Promise.resolve(null);
    let n = this.counts.get(c.id);
    if (n === undefined || n.until <= now) {
      // Bounded: stale counters go whenever the map grows past a size worth sweeping.
      if (this.counts.size >= 100_000) for (const [k, v] of this.counts) if (v.until <= now) this.counts.delete(k);
      n = { n: 0, until: now + c.periodMs };
      this.counts.set(c.id, n);
    }
    if (++n.n < c.limit) return Promise.resolve(null);
    this.counts.delete(c.id);
    const entry = banEntry(c, now);
    this.view.prune(now);
    this.view.put(entry);
    return Promise.resolve({ entry, dropped: capBans(this.view, splitBanId(c.id).ban, c.maxActive, now) });
  }

  acquire(key: string, max: number, leaseMs: number): Promise<string | null> {
    const t = this.now();
    let held = this.slots.get(key);
    if (held === undefined) this.slots.set(key, (held = new Map()));
    for (const [id, until] of held) if (until <= t) held.delete(id);
    if (held.size >= max) return Promise.resolve(null);
    const id = String(++this.seq);
    held.set(id, t + leaseMs);
    return Promise.resolve(id);
  }

  release(key: string, lease: string): Promise<void> {
    const held = this.slots.get(key);
    if (held === undefined) return Promise.resolve();
    held.delete(lease);
    if (held.size === 0) this.slots.delete(key);
    return Promise.resolve();
  }

  renew(leases: ReadonlyMap<string, string>, leaseMs: number): Promise<void> {
    const until = this.now() + leaseMs;
    for (const [lease, key] of leases) {
      const held = this.slots.get(key);
      if (held?.has(lease)) held.set(lease, until);
    }
    return Promise.resolve();
  }

  follow(): void {
    // Nothing to follow: every change is made in this process.
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

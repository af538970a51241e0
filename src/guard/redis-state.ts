/**
 * @module Runtime blocks, exemptions, bans, ban counters and in-flight leases in Redis, shared by every
 * replica. Each change is one script that writes the entries hash and appends a record to the change
 * log (redis-scripts.ts); a replica applies the records after the version it applied last, one entry
 * each, and records a version only once it has applied it, retrying until it has. So one ban, block or
 * lift costs every replica O(1) however many entries there are, and the whole set is read again only by
 * a replica that fell behind the log (redis-resync.ts, in chunks).
 *
 * Following: a replica polls (one script call per 250 ms) while ban rules are configured or it holds
 * entries; otherwise it keeps no timer and is woken by the change announcements it subscribes to. A
 * store that lost the entries (the version gone or gone back, or a different history at the version
 * applied last: a flush, a restart without persistence, a failover to a replica that had not synced) is
 * given this replica's entries back, said once through `events`.
 *
 * Leases are sorted sets scored by expiry, under their slot key's own hash tag (spread over a cluster): a
 * dead replica's slots free themselves when its leases run out.
 */
import { parseStoreUrl } from '../config/store-url.js';
import type { RedisClient } from '../limiter/redis/connection.js';
import type { SentinelWatch } from '../limiter/redis/sentinel-watch.js';
import type { EntryKind, GuardEntry } from './entry.js';
import { banEntry, type BanCount, type BanStarted, type GuardState, type GuardStateEvents } from './state.js';
import { fieldOf, GuardView } from './view.js';
import { defineGuardScripts, GuardKeys, LOG_MAXLEN, type GuardClient, type LogRecord } from './redis-scripts.js';
import { bounded, entryJson, entryScore, parseEntry, readAll, writeBack } from './redis-resync.js';
import { CALL_MS, connectGuardClient, readyWithin, type RedisGuardOptions } from './redis-client.js';
import { RedisLeaseSlots } from './redis-leases.js';
import { applyRecords, type LogPosition } from './redis-log.js';

export type { RedisGuardOptions } from './redis-client.js';

/** Log records read per call. */
const BATCH = 1_000;

export class RedisGuardState implements GuardState {
  readonly scope = 'shared' as const;
  events: GuardStateEvents | null = null;
  private current: GuardView;
  private readonly client: GuardClient;
  /** Subscribed to the change announcements: wakes a replica that keeps no timer. */
  private readonly sub: RedisClient;
  private readonly keys: GuardKeys;
  private readonly leases: RedisLeaseSlots;
  private readonly watches: SentinelWatch[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** The version applied last (-1: the set was never read) and its record's tag (null: not known). */
  private last = -1;
  private lastTag: string | null = null;
  private syncing: Promise<void> | null = null;
  private again = false;
  private following = false;
  private closed = false;
  private seq = 0;
  private readonly instance = Math.random().toString(36).slice(2, 10);
  private readonly now: () => number;
  private readonly pollMs: number;

  constructor(private readonly opts: RedisGuardOptions) {
    const url = parseStoreUrl(opts.url);
    if (url.kind === 'memory') throw new Error('RedisGuardState needs a Redis URL');
    this.keys = new GuardKeys(opts.prefix);
    this.now = opts.now ?? Date.now;
    this.pollMs = opts.pollMs ?? 250;
    this.current = new GuardView(this.now);
    this.client = defineGuardScripts(connectGuardClient(url, this.opts, this.watches));
    this.leases = new RedisLeaseSlots(this.client, opts.prefix, opts.timeoutMs, this.now);
    this.client.connect().catch(() => {}); // ioredis reconnects by itself; calls fail fast meanwhile
    this.client.on('error', () => {}); // reported by the counter store; this client only retries
    this.sub = connectGuardClient(url, this.opts, this.watches, true);
    this.sub.on('error', () => {});
    this.sub.on('message', () => void this.sync());
    // Connected (again): subscribe, and catch up on what was announced meanwhile. A SUBSCRIBE on a
    // connection that closed at once fails; the next `ready` subscribes again, the poll covers the gap.
    this.sub.on('ready', () => {
      this.sub.subscribe(this.keys.channel).catch(() => {});
      void this.sync();
    });
    this.sub.connect().catch(() => {});
  }

  get view(): GuardView {
    return this.current;
  }

  /** Resolves once connected, or after `waitMs` either way (the gateway then starts with what it has). */
  ready(waitMs: number): Promise<void> {
    return readyWithin(this.client, waitMs);
  }

  /** Applies what changed (coalesced: one catch-up in flight, one more if asked meanwhile). */
  sync(): Promise<void> {
    if (this.syncing !== null) {
      this.again = true;
      return this.syncing;
    }
    this.syncing = (async () => {
      do {
        this.again = false;
        try {
          await this.catchUp();
        } catch {
          // The store does not answer: what was applied stays in force, and the next poll tries again.
        }
      } while (this.again && !this.closed);
      this.syncing = null;
      this.schedule();
    })();
    return this.syncing;
  }

  follow(on: boolean): void {
    this.following = on;
    this.schedule();
  }

  async put(e: GuardEntry): Promise<void> {
    const field = fieldOf(e.kind, e.id);
    const k = this.keys;
    await bounded(
      this.client.rgPut(
        k.entries,
        k.version,
        k.log,
        k.group(field),
        field,
        entryJson(e),
        entryScore(e),
        this.tag(),
        LOG_MAXLEN,
        this.now(),
        k.channel,
      ),
      CALL_MS,
    );
    // Here at once; the log brings it (again, harmlessly) in order with the rest.
    this.current.put(e);
    this.schedule();
  }

  async remove(kind: EntryKind, id: string): Promise<GuardEntry | null> {
    const field = fieldOf(kind, id);
    const k = this.keys;
    const local = this.current.get(field);
    // An entry held here but not in the store (lost, not yet written back) is still removed everywhere.
    const force = local !== undefined ? '1' : '0';
    const old = await bounded(
      this.client.rgRemove(
        k.entries,
        k.version,
        k.log,
        k.group(field),
        field,
        this.tag(),
        LOG_MAXLEN,
        k.channel,
        force,
      ),
      CALL_MS,
    );
    this.current.remove(field);
    if (old === null) return null;
    return (old !== '' ? parseEntry(field, old) : null) ?? local ?? null;
  }

  async countBan(c: BanCount, now: number): Promise<BanStarted | null> {
    const field = fieldOf('ban', c.id);
    const k = this.keys;
    const entry = banEntry(c, now);
    const out = await bounded(
      this.client.rgCountBan(
        k.counter(c.id),
        k.entries,
        k.version,
        k.log,
        k.group(field),
        field,
        c.limit,
        c.periodMs,
        entryJson(entry),
        now,
        entry.expiresAt!,
        this.tag(),
        LOG_MAXLEN,
        k.channel,
        c.maxActive,
      ),
      this.opts.timeoutMs * 4,
    );
    if (out === null) return null;
    const dropped = out.slice(1);
    for (const f of dropped) this.current.remove(f);
    if (out[0] === '') return null;
    this.current.put(entry);
    this.schedule();
    return { entry, dropped: dropped.map((f) => f.slice('ban|'.length)) };
  }

  async acquire(key: string, max: number, leaseMs: number): Promise<string | null> {
    const lease = this.tag();
    return (await this.leases.acquire(key, max, leaseMs, lease)) ? lease : null;
  }

  release(key: string, lease: string): Promise<void> {
    return this.leases.release(key, lease);
  }

  renew(leases: ReadonlyMap<string, string>, leaseMs: number): Promise<void> {
    return this.leases.renew(leases, leaseMs);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    this.timer = undefined;
    for (const w of this.watches) w.close();
    this.client.disconnect();
    this.sub.disconnect();
    await this.syncing?.catch(() => {});
  }

  /** Unique per write: tells this history's records from another's at the same version. */
  private tag(): string {
    return `${this.instance}:${++this.seq}`;
  }

  /** A timer only while there is something to follow: ban rules, entries held, or a set never read. */
  private schedule(): void {
    if (this.closed) return;
    const want = this.following || this.last < 0 || this.current.size > 0;
    if (want && this.timer === undefined) {
      this.timer = setInterval(() => this.tick(), this.pollMs);
      this.timer.unref();
    } else if (!want && this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  private tick(): void {
    this.current.prune(this.now());
    if (this.client.status === 'ready') void this.sync();
    else this.schedule();
  }

  private async catchUp(): Promise<void> {
    if (this.last < 0) await this.resync();
    for (let round = 0; round < 100 && !this.closed; round++) {
      const k = this.keys;
      const r = await bounded(this.client.rgPoll(k.version, k.log, this.last, BATCH), CALL_MS);
      if (r.length === 0) {
        if (this.last === 0 && this.current.size === 0) return;
        return this.lost('its version is gone');
      }
      const version = Number(r[0]);
      if (version < this.last) return this.lost(`its version went back from ${this.last} to ${version}`);
      if (this.lastTag !== null && r[1] !== '' && r[1] !== this.lastTag)
        return this.lost(`its change ${this.last} is not the one applied here`);
      if (version === this.last) return;
      if (!this.apply(r[2])) await this.resync();
      else if (this.last >= version) return;
    }
  }

  /** Applies records in order (redis-log.ts); false when the set must be read again. */
  private apply(records: readonly LogRecord[]): boolean {
    const at: LogPosition = { last: this.last, tag: this.lastTag };
    try {
      return applyRecords(this.current, records, at, this.now());
    } finally {
      this.last = at.last;
      this.lastTag = at.tag;
    }
  }

  private async resync(): Promise<void> {
    const full = await readAll(this.client, this.keys, this.now);
    this.current = full.view;
    this.last = full.version;
    this.lastTag = full.tag;
    this.events?.resynced(full.view.size);
  }

  /** The store lost entries this replica holds: they are written back, then the set is read again. */
  private async lost(why: string): Promise<void> {
    const live = this.current.live(this.now());
    if (live.length > 0) {
      const written = await writeBack(this.client, this.keys, live, Math.max(this.last, 0), this.tag());
      this.events?.restored(written, live.length, why);
    }
    await this.resync();
  }
}

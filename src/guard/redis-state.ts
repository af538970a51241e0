/**
 * @module Runtime blocks, exemptions, bans, ban counters and in-flight leases in Redis, shared by every
 * replica. Entries are one hash (field `<kind>|<id>`, value JSON with the expiry) beside a version
 * counter bumped on every change; each replica polls the version (one GET per interval, whatever the
 * traffic) and re-reads the hash only when it moved, so a change reaches every replica within one poll
 * interval plus a round trip, and a refused request costs the store nothing. The entries, version and
 * ban counters share one hash tag, so their scripts work on a cluster too. Leases are sorted sets scored
 * by expiry, under their slot key's own hash tag (spread over a cluster): a dead replica's slots free
 * themselves when its leases run out.
 */
import type { Redis, Cluster } from 'ioredis';
import { parseStoreUrl } from '../config/store-url.js';
import { createRedisClient } from '../limiter/redis/connection.js';
import { sentinelWatchFor, type SentinelWatch } from '../limiter/redis/sentinel-watch.js';
import { isLive, type BanCount, type EntryKind, type GuardEntry, type GuardState } from './state.js';

/** Counts one ban event; starts the ban (and bumps the version) when the count reaches the limit. */
const COUNT_BAN = `
local field = 'ban|' .. ARGV[1]
local now = tonumber(ARGV[5])
local cur = redis.call('HGET', KEYS[2], field)
if cur then
  local e = cjson.decode(cur)
  if e.expiresAt == cjson.null or e.expiresAt > now then return false end
end
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
if n < tonumber(ARGV[2]) then return false end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[2], field, ARGV[4])
redis.call('INCR', KEYS[3])
return ARGV[4]`;

/** Takes a slot when fewer than `max` unexpired leases are held. */
const ACQUIRE = `
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`;

type Client = (Redis | Cluster) & {
  rgCountBan(counter: string, entries: string, version: string, id: string, limit: number, periodMs: number, json: string, now: number): Promise<string | null>;
  rgAcquire(key: string, now: number, max: number, leaseMs: number, lease: string): Promise<number>;
};

export interface RedisGuardOptions {
  readonly url: string;
  readonly prefix: string;
  /** Bound of every call on the request path (the store timeout). */
  readonly timeoutMs: number;
  /** The sentinels' own password (`store.sentinelPassword`), as the counter store is given it. */
  readonly sentinelPassword?: string | null;
  /** How often the version is polled (default 250 ms: changes apply within 1 s with room to spare). */
  readonly pollMs?: number;
  readonly now?: () => number;
}

export class RedisGuardState implements GuardState {
  readonly scope = 'shared' as const;
  private readonly client: Client;
  private readonly entriesKey: string;
  private readonly versionKey: string;
  private readonly tag: string;
  private readonly listeners: (() => void)[] = [];
  private readonly timer: NodeJS.Timeout;
  private lastVersion: string | null | undefined;
  private polling = false;
  private seq = 0;
  private readonly instance = Math.random().toString(36).slice(2, 10);
  private readonly now: () => number;
  /** Sentinel: keeps this client on the announced master, as the counter store's is (sentinel-watch.ts). */
  private readonly watch: SentinelWatch | undefined;

  constructor(private readonly opts: RedisGuardOptions) {
    const url = parseStoreUrl(opts.url);
    if (url.kind === 'memory') throw new Error('RedisGuardState needs a Redis URL');
    const sentinel = opts.sentinelPassword != null ? { sentinelPassword: opts.sentinelPassword } : {};
    this.watch = sentinelWatchFor(url, opts.sentinelPassword);
    this.client = createRedisClient(url, {
      connectTimeoutMs: 2_000,
      timeoutMs: opts.timeoutMs,
      ...sentinel,
      ...(this.watch !== undefined ? { natMap: this.watch.map } : {}),
    }) as Client;
    if (this.watch !== undefined) this.watch.follow(this.client as Redis);
    this.client.defineCommand('rgCountBan', { numberOfKeys: 3, lua: COUNT_BAN });
    this.client.defineCommand('rgAcquire', { numberOfKeys: 1, lua: ACQUIRE });
    this.client.connect().catch(() => {}); // ioredis reconnects by itself; calls fail fast meanwhile
    this.client.on('error', () => {}); // reported by the counter store; this client only retries
    this.tag = `${opts.prefix}:{guard}`;
    this.entriesKey = `${this.tag}:entries`;
    this.versionKey = `${this.tag}:version`;
    this.now = opts.now ?? Date.now;
    this.timer = setInterval(() => void this.poll(), opts.pollMs ?? 250);
    this.timer.unref();
  }

  /** Resolves once connected, or after `waitMs` either way (the gateway then starts with what it has). */
  ready(waitMs: number): Promise<void> {
    if (this.client.status === 'ready') return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.client.off('ready', done);
        resolve();
      };
      const timer = setTimeout(done, waitMs);
      this.client.once('ready', done);
    });
  }

  async list(): Promise<GuardEntry[]> {
    const all = await this.bounded(this.client.hgetall(this.entriesKey), 2_000);
    const t = this.now();
    const live: GuardEntry[] = [];
    const dead: string[] = [];
    for (const [field, json] of Object.entries(all)) {
      const e = parseEntry(field, json);
      if (e !== null && isLive(e, t)) live.push(e);
      else dead.push(field);
    }
    // Any replica may sweep: HDEL of an already-deleted field is harmless.
    if (dead.length > 0) this.client.hdel(this.entriesKey, ...dead).catch(() => {});
    return live;
  }

  async put(e: GuardEntry): Promise<void> {
    const json = JSON.stringify({ reason: e.reason, createdAt: e.createdAt, expiresAt: e.expiresAt });
    await this.bounded(this.client.multi().hset(this.entriesKey, `${e.kind}|${e.id}`, json).incr(this.versionKey).exec(), 2_000);
    this.changed();
  }

  async remove(kind: EntryKind, id: string): Promise<boolean> {
    const r = await this.bounded(this.client.multi().hdel(this.entriesKey, `${kind}|${id}`).incr(this.versionKey).exec(), 2_000);
    this.changed();
    return Number(r?.[0]?.[1] ?? 0) > 0;
  }

  async countBan(c: BanCount, now: number): Promise<GuardEntry | null> {
    const entry: GuardEntry = { kind: 'ban', id: c.id, reason: c.reason, createdAt: now, expiresAt: now + c.banMs };
    const json = JSON.stringify({ reason: entry.reason, createdAt: now, expiresAt: entry.expiresAt });
    const started = await this.bounded(
      this.client.rgCountBan(`${this.tag}:count:${c.id}`, this.entriesKey, this.versionKey, c.id, c.limit, c.periodMs, json, now),
      this.opts.timeoutMs * 4,
    );
    if (started === null) return null;
    this.changed();
    return entry;
  }

  async acquire(key: string, max: number, leaseMs: number): Promise<string | null> {
    const lease = `${this.instance}:${++this.seq}`;
    const ok = await this.bounded(this.client.rgAcquire(this.leaseKey(key), this.now(), max, leaseMs, lease), this.opts.timeoutMs);
    return ok === 1 ? lease : null;
  }

  async release(key: string, lease: string): Promise<void> {
    await this.bounded(this.client.zrem(this.leaseKey(key), lease), 2_000);
  }

  async renew(leases: ReadonlyMap<string, string>, leaseMs: number): Promise<void> {
    if (leases.size === 0) return;
    const until = this.now() + leaseMs;
    await Promise.all([...leases].map(([lease, key]) => this.client.zadd(this.leaseKey(key), 'XX', until, lease).catch(() => 0)));
  }

  onChange(listener: () => void): void {
    this.listeners.push(listener);
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    this.watch?.close();
    this.client.disconnect();
  }

  /** Each rule's key carries its own hash tag (the bucket's), so leases spread over a cluster. */
  private leaseKey(key: string): string {
    return `${this.opts.prefix}:lease:${key}`;
  }

  private async poll(): Promise<void> {
    if (this.polling || this.client.status !== 'ready') return;
    this.polling = true;
    try {
      const v = await this.bounded(this.client.get(this.versionKey), 1_000);
      if (v !== this.lastVersion) {
        this.lastVersion = v;
        this.changed();
      }
    } catch {
      // The last known entries stay in force while the store does not answer.
    } finally {
      this.polling = false;
    }
  }

  private changed(): void {
    for (const l of this.listeners) l();
  }

  private bounded<T>(p: Promise<T>, ms: number): Promise<T> {
    let timer: NodeJS.Timeout;
    return Promise.race([
      p,
      new Promise<T>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`store did not answer within ${ms} ms`)), ms);
      }),
    ]).finally(() => clearTimeout(timer));
  }
}

function parseEntry(field: string, json: string): GuardEntry | null {
  const bar = field.indexOf('|');
  const kind = field.slice(0, bar);
  if (kind !== 'block' && kind !== 'exempt' && kind !== 'ban') return null;
  try {
    const v = JSON.parse(json) as { reason?: unknown; createdAt?: unknown; expiresAt?: unknown };
    return {
      kind,
      id: field.slice(bar + 1),
      reason: typeof v.reason === 'string' ? v.reason : '',
      createdAt: typeof v.createdAt === 'number' ? v.createdAt : 0,
      expiresAt: typeof v.expiresAt === 'number' ? v.expiresAt : null,
    };
  } catch {
    return null;
  }
}

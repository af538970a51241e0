/**
 * @module The fleet: the gateway processes sharing one Redis, learned from the store instead of
 * configured. Each process (each `--workers` worker too) registers in a sorted set with a heartbeat,
 * scored by Redis's clock; a member not heard of for three heartbeats is gone. The live count sizes the
 * local fallback's share and the leases (`store.gateways` is only the count used until the store has
 * answered once, e.g. when it is unreachable at start); when the store fails, the last count stays.
 *
 * Joining (issue 37's start-up gap): gateways started together register one after the other, so the
 * first heartbeat of the first one counts only itself; kept until its next heartbeat, that count gave it
 * the whole limit as its share should the store fail in those seconds (two gateways: 75 of 50 a window).
 * So for one heartbeat period after each connection (at start, and again after every reconnection, as a
 * restarted Redis has lost the set), a process beats JOIN_SPEEDUP times as often (every 500 ms), and
 * its count does not fall below what it was (`store.gateways` at start, the last count after an outage):
 * members that start with it are counted within one quick beat of their registration, and members it
 * has not seen yet are assumed up to the floor. A greater count is taken at once; a lower one (a
 * scale-down: a member that deregistered, or went unheard for three heartbeats) from the first beat after
 * the join, at most one period later than before. Beats stay off the request path (a timer).
 * The members already running learn of a join at once: a joining process announces itself (PUBLISH on
 * `<prefix>:{fleet}:joins`) after its first beat, and each member that hears it beats then, instead of
 * at its next heartbeat up to a period later (a third gateway joining two, Redis failing in that gap:
 * 25 + 25 + 17 of 50 admitted a window, as the two still took half each).
 * The same heartbeat publishes this process's triage sketch (bounded, expiring with it), so that
 * `/admin/limited` can answer for the whole fleet, and its request rates (rates.ts), so that every
 * replica's status page shows every replica's.
 *
 * Keys, all in one cluster slot (`{fleet}`): `<prefix>:{fleet}:gateways` (member: the process id),
 * `<prefix>:{fleet}:limited:<id>` (a JSON sketch) and `<prefix>:{fleet}:rates:<id>` (JSON rates); the
 * channel `<prefix>:{fleet}:joins` (a joining member's id).
 */
import os from 'node:os';
import { parseStoreUrl } from '../config/store-url.js';
import type { RedisClient } from '../limiter/redis/connection.js';
import { connectFollowed } from '../limiter/redis/followed-client.js';
import type { SentinelWatch } from '../limiter/redis/sentinel-watch.js';
import { formatPrefix } from '../limiter/store-format.js';

export const HEARTBEAT_MS = 5_000;
/** A member is gone after this many heartbeats unheard. */
const MISSED_BEATS = 3;
/** While joining (one period after each connection), beats come this many times as often. */
export const JOIN_SPEEDUP = 10;

// Registers (scored by the server's clock), drops members unheard for the expiry, publishes the sketch
// and the rates (or drops them), and answers the live count. One slot: KEYS share the {fleet} tag.
const BEAT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ttl)
redis.call('PEXPIRE', KEYS[1], ttl)
if ARGV[3] ~= '' then redis.call('SET', KEYS[2], ARGV[3], 'PX', ttl) else redis.call('DEL', KEYS[2]) end
if ARGV[4] ~= '' then redis.call('SET', KEYS[3], ARGV[4], 'PX', ttl) else redis.call('DEL', KEYS[3]) end
return redis.call('ZCARD', KEYS[1])
`;

export interface FleetOptions {
  readonly url: string;
  readonly prefix: string;
  /** Bound of each call (store.timeout, at least 1 s here: a heartbeat is not on the request path). */
  readonly timeoutMs: number;
  readonly sentinelPassword?: string | null | undefined;
  /** The count until the store has answered once (store.gateways). */
  readonly floor: number;
  /** Told the live count when it changes (and the floor at once). */
  readonly onCount: (gateways: number) => void;
  /** This process's sketch to publish, as JSON (undefined: none). */
  readonly sketch?: () => string | undefined;
  /** This process's request rates to publish, as JSON (rates.ts; undefined: none). */
  readonly rates?: () => string | undefined;
  readonly heartbeatMs?: number;
}

/** One replica's published sketch. */
export interface PublishedSketch {
  readonly id: string;
  readonly json: string;
}

/** What the admin API reads of the fleet. */
export interface FleetSketches {
  readonly id: string;
  /** Live replicas (the heartbeat's last count). */
  readonly gateways: number;
  sketches(): Promise<PublishedSketch[]>;
  /** Publishes this replica's sketch now (so a fleet answer includes its latest 429s). */
  beat(): Promise<void>;
  /** Every live replica's published rates (rates.ts), as JSON. */
  rates?(): Promise<PublishedSketch[]>;
}

export class Fleet implements FleetSketches {
  /** This process in the fleet: host name, pid and a random part (a restarted pod is a new member). */
  readonly id = `${os.hostname()}:${process.pid}:${Math.random().toString(36).slice(2, 8)}`;
  private count: number;
  private learned = false;
  private readonly client: RedisClient;
  /** The Sentinel watches that keep both connections on the announced master (none otherwise). */
  private readonly watches: SentinelWatch[] = [];
  /** The joins channel's connection (a subscriber: no other command on it). */
  private readonly sub: RedisClient;
  /** This connection's join is not announced yet (set on each `ready`, cleared by the first beat after it). */
  private announce = false;
  private readonly keys: {
    readonly joins: string;
    readonly set: string;
    readonly sketch: (id: string) => string;
    readonly rates: (id: string) => string;
  };
  private readonly beatMs: number;
  private timer: NodeJS.Timeout | undefined;
  /** The beat loop's generation: a restarted loop ends the one before. */
  private loop = 0;
  private closed = false;
  /** Joining ends then (Date.now()); the count does not fall below `hold` until then. */
  private joinUntil = 0;
  private hold: number;

  constructor(private readonly o: FleetOptions) {
    const url = parseStoreUrl(o.url);
    if (url.kind === 'memory') throw new Error('the fleet needs a Redis store');
    const base = `${formatPrefix(o.prefix)}:{fleet}`;
    this.keys = {
      joins: `${base}:joins`,
      set: `${base}:gateways`,
      sketch: (id) => `${base}:limited:${id}`,
      rates: (id) => `${base}:rates:${id}`,
    };
    this.beatMs = o.heartbeatMs ?? HEARTBEAT_MS;
    this.count = Math.max(1, o.floor);
    this.hold = this.count;
    const connection = { timeoutMs: this.timeoutMs, sentinelPassword: o.sentinelPassword };
    this.client = connectFollowed(url, connection, this.watches);
    this.client.on('error', () => {}); // the counter store reports the store's trouble; this client only retries
    // Each connection (the first, and each after a failure or a failover) joins again: beats start at once.
    this.client.on('ready', () => {
      this.joinUntil = Date.now() + this.beatMs;
      this.hold = Math.max(1, o.floor, this.count);
      this.announce = true;
      this.tick();
    });
    this.client.connect().catch(() => {});
    // Another member's join: beat now, so that its share is counted before a fault, not a period later.
    this.sub = connectFollowed(url, { ...connection, subscriber: true }, this.watches);
    this.sub.on('error', () => {});
    // Subscribes on every connection (a SUBSCRIBE on one that closed at once fails; the next ready retries).
    this.sub.on('ready', () => void this.sub.subscribe(this.keys.joins).catch(() => {}));
    this.sub.on('message', (_channel: string, id: string) => {
      if (id !== this.id && !this.closed) this.tick();
    });
    this.sub.connect().catch(() => {});
    o.onCount(this.count);
  }

  /** True while joining: quick beats, and the count held. */
  private get joining(): boolean {
    return Date.now() < this.joinUntil;
  }

  /** Beats now, then again in a period (a quicker one while joining), until closed. */
  private tick(): void {
    clearTimeout(this.timer);
    const loop = ++this.loop;
    void this.beat().finally(() => {
      if (loop !== this.loop || this.closed) return;
      const ms = this.joining ? Math.max(1, Math.round(this.beatMs / JOIN_SPEEDUP)) : this.beatMs;
      this.timer = setTimeout(() => this.tick(), ms);
      this.timer.unref();
    });
  }

  /** The live count (the floor until learned). */
  get gateways(): number {
    return this.count;
  }

  /** True once the store has answered a heartbeat. */
  get known(): boolean {
    return this.learned;
  }

  private get timeoutMs(): number {
    return Math.max(1_000, this.o.timeoutMs);
  }

  /** Registers (again), publishes the sketch, learns the count; a failure keeps the last count. */
  async beat(): Promise<void> {
    if (this.client.status !== 'ready') return;
    const ttl = this.beatMs * MISSED_BEATS;
    try {
      const [sketch, rates] = [this.o.sketch?.() ?? '', this.o.rates?.() ?? ''];
      const n = await this.bounded(
        this.client.eval(
          BEAT,
          3,
          this.keys.set,
          this.keys.sketch(this.id),
          this.keys.rates(this.id),
          this.id,
          ttl,
          sketch,
          rates,
        ),
      );
      this.learned = true;
      if (this.announce) {
        this.announce = false;
        await this.bounded(this.client.publish(this.keys.joins, this.id)).catch(() => {});
      }
      // While joining, members not registered yet are assumed up to the count held.
      const live = Math.max(1, Number(n), this.joining ? this.hold : 1);
      if (live !== this.count) {
        this.count = live;
        this.o.onCount(live);
      }
    } catch {
      // The store does not answer: the fleet is what it was last seen to be.
    }
  }

  /** Every live replica's published sketch (this one's included, as last published). */
  sketches(): Promise<PublishedSketch[]> {
    return this.published(this.keys.sketch);
  }

  /** Every live replica's published rates (this one's included, as last published). */
  rates(): Promise<PublishedSketch[]> {
    return this.published(this.keys.rates);
  }

  private async published(key: (id: string) => string): Promise<PublishedSketch[]> {
    const ids = (await this.bounded(this.client.zrange(this.keys.set, 0, -1))) as string[];
    if (ids.length === 0) return [];
    const values = (await this.bounded(this.client.mget(...ids.map(key)))) as (string | null)[];
    const out: PublishedSketch[] = [];
    for (let i = 0; i < ids.length; i++) if (values[i] != null) out.push({ id: ids[i]!, json: values[i]! });
    return out;
  }

  /** Leaves the fleet (the others' shares grow at their next heartbeat), then disconnects. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.client.status === 'ready') {
      await this.bounded(
        Promise.all([
          this.client.zrem(this.keys.set, this.id),
          this.client.del(this.keys.sketch(this.id), this.keys.rates(this.id)),
        ]),
      ).catch(() => {});
    }
    for (const w of this.watches) w.close();
    this.client.disconnect();
    this.sub.disconnect();
  }

  private bounded<T>(p: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout;
    return Promise.race([
      p,
      new Promise<T>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`store did not answer within ${this.timeoutMs} ms`)), this.timeoutMs);
      }),
    ]).finally(() => clearTimeout(timer));
  }
}

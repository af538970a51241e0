/**
 * @module The gateway's attack-day runtime: the local view of runtime blocks, exemptions and bans kept
 * in step with the store (by the state: state.ts, redis-state.ts), ban counting after answers, in-flight
 * slots, and the triage sketch. One per process; the per-snapshot rules come from the request policy
 * (guard/rules.ts). Every lookup here is O(1) and reads no store.
 */
import type { CidrSet } from '../identity/index.js';
import type { StoreLog } from '../limiter/types.js';
import type { CompiledBan, CompiledConcurrency } from './rules.js';
import type { GuardMetrics } from './metrics.js';
import type { GuardEntry, GuardState } from './state.js';
import { TopLimited } from './top-keys.js';
import { LimitedComposites } from './limited-composites.js';
import type { GuardView } from './view.js';
import type { Surges } from '../surge/surges.js';

/** A store-scope slot is leased this long and renewed while its request runs: a dead replica frees it by then. */
export const LEASE_MS = 15_000;
/** The ban cap's log line comes at most once per ban name in this time (the metric counts every one). */
const CAP_LOG_MS = 10_000;

export type Release = () => void;

export class Guard {
  private readonly local = new Map<string, number>();
  /** Store-scope leases held by this process: lease id → slot key (renewed periodically while any is held). */
  private readonly leases = new Map<string, string>();
  private renewTimer: NodeJS.Timeout | undefined;
  /** Per ban name: when the cap was last logged, and the bans ended since. */
  private readonly capLog = new Map<string, { at: number; since: number }>();
  readonly top = new TopLimited();
  /** Composite buckets holding an IP that refused it: a lifted block or ban resets them too. */
  readonly limitedComposites = new LimitedComposites();
  metrics: GuardMetrics | null = null;
  /** `surges:` at run time (their state is this guard's, kind `surge`); null where none run (explain). */
  surges: Surges | null = null;

  constructor(
    readonly state: GuardState,
    private readonly log: StoreLog,
    /** The clock its entries expire by (surges read it too). */
    readonly now: () => number = Date.now,
  ) {
    state.events = {
      restored: (written, held, why) => {
        this.metrics?.restores.inc();
        this.log.warn(
          { guard: 'restored', written, held, why },
          `guard state lost in the store (${why}): wrote back ${written} of the ${held} runtime blocks, exemptions and bans this replica held`,
        );
      },
      resynced: () => this.metrics?.resyncs.inc(),
    };
  }

  /** The local picture in force (replaced whole only when a replica reads the set again). */
  get view(): GuardView {
    return this.state.view;
  }

  /** Brings this replica's picture up to the store (after an admin write, before a list). */
  sync(): Promise<void> {
    return this.state.sync();
  }

  /**
   * The table was loaded or reloaded. `bans`: whether it has ban rules (or surges): a shared state then
   * follows changes continuously, else only when woken. Surges watch only while the table has some.
   */
  rulesInUse(bans: boolean): void {
    this.state.follow(bans);
    this.surges?.configured();
  }

  /** Every live entry (admin lists). */
  entries(): GuardEntry[] {
    const t = this.now();
    this.view.prune(t);
    return this.view.live(t);
  }

  /** Live bans per ban name (the gauge). */
  activeBans(): Map<string, number> {
    const v = this.view;
    v.prune(this.now());
    return new Map([...v.byBan].map(([ban, keys]) => [ban, keys.size]));
  }

  /** The ban holding this IP key (`ip:…`), or null. */
  ipBan(ipBanKey: string): string | null {
    const hit = this.view.ipBans.get(ipBanKey);
    return hit !== undefined && hit.expiresAt > this.now() ? hit.ban : null;
  }

  /** Whether `key` is banned by `ban` now. */
  banned(ban: string, key: string): boolean {
    const until = this.view.byBan.get(ban)?.get(key);
    return until !== undefined && until > this.now();
  }

  /** Whether the first stage has anything to look at (runtime blocks or IP bans): else it is skipped. */
  hasEarly(): boolean {
    const v = this.view;
    return v.blocks.size > 0 || v.ipBans.size > 0;
  }

  hasBans(ban: string): boolean {
    return this.view.byBan.has(ban);
  }

  runtimeBlocks(): CidrSet | null {
    const b = this.view.blocks;
    return b.size > 0 ? b : null;
  }

  runtimeExempts(): CidrSet | null {
    const e = this.view.exempts;
    return e.size > 0 ? e : null;
  }

  /** Counts an answer for a ban; logs and counts a ban this event starts, and the bans its cap ends. Never throws. */
  count(ban: CompiledBan, key: string): void {
    const id = `${ban.rule.name}/${key}`;
    const reason = `${ban.limit} in ${ban.periodMs / 1000}s on ${ban.rule.name}`;
    const c = { id, limit: ban.limit, periodMs: ban.periodMs, banMs: ban.banMs, reason, maxActive: ban.maxActive };
    this.state.countBan(c, this.now()).then(
      (started) => {
        if (started === null) return;
        this.metrics?.bansStarted.labels(ban.rule.name).inc();
        const until = new Date(started.entry.expiresAt!).toISOString();
        this.log.warn({ ban: ban.rule.name, key, until }, `ban started: ${key} by ${ban.rule.name} (${reason}) until ${until}`);
        if (started.dropped.length > 0) this.capped(ban, started.dropped);
      },
      () => {
        // A count the store could not take is lost: a ban may start a little later, never wrongly.
      },
    );
  }

  /**
   * Takes an in-flight slot for `key` (the rule's prefix included); the release to call when the
   * exchange ends (idempotent), or null when all `max` are taken. A store that does not answer leaves
   * the slot counted locally.
   */
  async enter(c: CompiledConcurrency, key: string): Promise<Release | null> {
    if (c.scope === 'store' && this.state.scope === 'shared') {
      let lease: string | null;
      try {
        lease = await this.state.acquire(key, c.max, LEASE_MS);
      } catch {
        return this.enterLocal(c, key);
      }
      if (lease === null) return null;
      this.holdLease(lease, key);
      let done = false;
      return () => {
        if (done) return;
        done = true;
        this.leases.delete(lease);
        this.state.release(key, lease).catch(() => {}); // the lease expires by itself otherwise
      };
    }
    return this.enterLocal(c, key);
  }

  /** Slots held locally now, for tests and triage. */
  inFlight(key: string): number {
    return this.local.get(key) ?? 0;
  }

  async close(): Promise<void> {
    clearInterval(this.renewTimer);
    this.surges?.close();
    await this.state.close();
  }

  /** The cap ended live bans of `ban`: counted each, logged at most once per CAP_LOG_MS per ban name. */
  private capped(ban: CompiledBan, dropped: readonly string[]): void {
    const name = ban.rule.name;
    this.metrics?.bansDropped.labels(name).inc(dropped.length);
    const t = this.now();
    const seen = this.capLog.get(name) ?? { at: -Infinity, since: 0 };
    seen.since += dropped.length;
    this.capLog.set(name, seen);
    if (t - seen.at < CAP_LOG_MS) return;
    this.log.warn(
      { ban: name, maxActive: ban.maxActive, ended: seen.since },
      `ban ${name} holds its cap of ${ban.maxActive} live bans: ended the ${seen.since} oldest since the last such line (e.g. ${dropped[0]!.slice(name.length + 1)})`,
    );
    seen.at = t;
    seen.since = 0;
  }

  /** Renewal runs only while a lease is held: no timer otherwise. */
  private holdLease(lease: string, key: string): void {
    this.leases.set(lease, key);
    if (this.renewTimer !== undefined) return;
    this.renewTimer = setInterval(() => {
      if (this.leases.size > 0) return void this.state.renew(this.leases, LEASE_MS).catch(() => {});
      clearInterval(this.renewTimer);
      this.renewTimer = undefined;
    }, LEASE_MS / 3);
    this.renewTimer.unref();
  }

  private enterLocal(c: CompiledConcurrency, key: string): Release | null {
    const n = this.local.get(key) ?? 0;
    if (n >= c.max) return null;
    this.local.set(key, n + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const left = (this.local.get(key) ?? 1) - 1;
      if (left <= 0) this.local.delete(key);
      else this.local.set(key, left);
    };
  }
}

/**
 * @module The gateway's attack-day runtime: the local view of runtime blocks, exemptions and bans kept
 * in step with the store, ban counting after answers, in-flight slots, and the triage sketch. One per
 * process; the per-snapshot rules come from the request policy (guard/rules.ts).
 */
import type { CidrSet } from '../identity/index.js';
import type { StoreLog } from '../limiter/types.js';
import type { CompiledBan, CompiledConcurrency } from './rules.js';
import type { GuardMetrics } from './metrics.js';
import type { GuardEntry, GuardState } from './state.js';
import { TopLimited } from './top-keys.js';
import { EMPTY_VIEW, GuardView } from './view.js';

/** A store-scope slot is leased this long and renewed while its request runs: a dead replica frees it by then. */
export const LEASE_MS = 15_000;

export type Release = () => void;

export class Guard {
  private view: GuardView = EMPTY_VIEW;
  private refreshing: Promise<void> | null = null;
  private again = false;
  private readonly local = new Map<string, number>();
  /** Store-scope leases held by this process: lease id → slot key (renewed periodically). */
  private readonly leases = new Map<string, string>();
  private readonly renewTimer: NodeJS.Timeout;
  readonly top = new TopLimited();
  metrics: GuardMetrics | null = null;

  constructor(
    readonly state: GuardState,
    private readonly log: StoreLog,
    private readonly now: () => number = Date.now,
  ) {
    state.onChange(() => void this.refresh());
    this.renewTimer = setInterval(() => {
      if (this.leases.size > 0) this.state.renew(this.leases, LEASE_MS).catch(() => {});
    }, LEASE_MS / 3);
    this.renewTimer.unref();
  }

  /** Re-reads the entries from the store (coalesced: one read in flight, one more if asked meanwhile). */
  refresh(): Promise<void> {
    if (this.refreshing !== null) {
      this.again = true;
      return this.refreshing;
    }
    this.refreshing = (async () => {
      do {
        this.again = false;
        try {
          this.view = new GuardView(await this.state.list(), this.now());
        } catch {
          // The store does not answer: the entries last read stay in force.
        }
      } while (this.again);
      this.refreshing = null;
    })();
    return this.refreshing;
  }

  /** The view in force, rebuilt locally when a block or exemption expires (no store call). */
  current(): GuardView {
    const v = this.view;
    // Nothing that expires (the usual case): no clock read on the request path.
    if (v.nextExpiry !== Infinity && this.now() >= v.nextExpiry) this.view = new GuardView(v.entries, this.now());
    return this.view;
  }

  entries(): readonly GuardEntry[] {
    return this.current().entries;
  }

  /** The ban holding this IP key (`ip:…`), or null. */
  ipBan(ipBanKey: string): string | null {
    const hit = this.current().ipBans.get(ipBanKey);
    return hit !== undefined && hit.expiresAt > this.now() ? hit.ban : null;
  }

  /** Whether `key` is banned by `ban` now. */
  banned(ban: string, key: string): boolean {
    const until = this.current().byBan.get(ban)?.get(key);
    return until !== undefined && until > this.now();
  }

  /** Whether the first stage has anything to look at (runtime blocks or IP bans): else it is skipped. */
  hasEarly(): boolean {
    const v = this.current();
    return v.blocks !== null || v.ipBans.size > 0;
  }

  hasBans(ban: string): boolean {
    return this.current().byBan.has(ban);
  }

  runtimeBlocks(): CidrSet | null {
    return this.current().blocks;
  }

  runtimeExempts(): CidrSet | null {
    return this.current().exempts;
  }

  /** Counts an answer for a ban; logs and counts a ban this event starts. Never throws. */
  count(ban: CompiledBan, key: string): void {
    const id = `${ban.rule.name}/${key}`;
    const reason = `${ban.limit} in ${ban.periodMs / 1000}s on ${ban.rule.name}`;
    this.state.countBan({ id, limit: ban.limit, periodMs: ban.periodMs, banMs: ban.banMs, reason }, this.now()).then(
      (started) => {
        if (started === null) return;
        this.metrics?.bansStarted.labels(ban.rule.name).inc();
        this.log.warn(
          { ban: ban.rule.name, key, until: new Date(started.expiresAt!).toISOString() },
          `ban started: ${key} by ${ban.rule.name} (${reason}) until ${new Date(started.expiresAt!).toISOString()}`,
        );
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
      this.leases.set(lease, key);
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
    await this.state.close();
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

/**
 * @module Bans at run time: which keys are banned now (the replicated state's local view, O(1), no store
 * read), the answers counted after each exchange, and the bans those counts start — logged, counted, and
 * held to each ban's cap of live bans.
 */
import type { StoreLog } from '../limiter/types.js';
import type { CompiledBan } from './rules.js';
import type { GuardMetrics } from './metrics.js';
import type { GuardState } from './state.js';

/** A ban the request matched, and its key: counted once its answer is known. */
export interface BanHit {
  readonly ban: CompiledBan;
  readonly key: string;
}

/** The ban cap's log line comes at most once per ban name in this time (the metric counts every one). */
const CAP_LOG_MS = 10_000;

export class Bans {
  /** Per ban name: when the cap was last logged, and the bans ended since. */
  private readonly capLog = new Map<string, { at: number; since: number }>();

  constructor(
    private readonly state: GuardState,
    private readonly log: StoreLog,
    private readonly now: () => number,
    /** The guard's metrics once set (they come after the guard: null in explain). */
    private readonly metrics: () => GuardMetrics | null,
  ) {}

  /** The ban holding this IP key (`ip:…`), or null. */
  ipBan(ipBanKey: string): string | null {
    const hit = this.state.view.ipBans.get(ipBanKey);
    return hit !== undefined && hit.expiresAt > this.now() ? hit.ban : null;
  }

  /** Whether `key` is banned by `ban` now. */
  banned(ban: string, key: string): boolean {
    const until = this.state.view.byBan.get(ban)?.get(key);
    return until !== undefined && until > this.now();
  }

  /** Whether `ban` holds any key now (else a request need not be keyed for it). */
  has(ban: string): boolean {
    return this.state.view.byBan.has(ban);
  }

  /** Live bans per ban name (the gauge). */
  active(): Map<string, number> {
    const v = this.state.view;
    v.prune(this.now());
    return new Map([...v.byBan].map(([ban, keys]) => [ban, keys.size]));
  }

  /** After the answer: counts the request in each ban it matched whose `on` takes this status. */
  countHits(hits: readonly BanHit[], status: number): void {
    for (const h of hits) if (h.ban.on === null || h.ban.on.has(status)) this.count(h.ban, h.key);
  }

  /** Counts an answer for a ban; logs and counts a ban this event starts, and the bans its cap ends. Never throws. */
  count(ban: CompiledBan, key: string): void {
    const id = `${ban.rule.name}/${key}`;
    const reason = `${ban.limit} in ${ban.periodMs / 1000}s on ${ban.rule.name}`;
    const c = { id, limit: ban.limit, periodMs: ban.periodMs, banMs: ban.banMs, reason, maxActive: ban.maxActive };
    this.state.countBan(c, this.now()).then(
      (started) => {
        if (started === null) return;
        this.metrics()?.bansStarted.labels(ban.rule.name).inc();
        const until = new Date(started.entry.expiresAt!).toISOString();
        this.log.warn(
          { ban: ban.rule.name, key, until },
          `ban started: ${key} by ${ban.rule.name} (${reason}) until ${until}`,
        );
        if (started.dropped.length > 0) this.capped(ban, started.dropped);
      },
      () => {
        // A count the store could not take is lost: a ban may start a little later, never wrongly.
      },
    );
  }

  /** The cap ended live bans of `ban`: counted each, logged at most once per CAP_LOG_MS per ban name. */
  private capped(ban: CompiledBan, dropped: readonly string[]): void {
    const name = ban.rule.name;
    this.metrics()?.bansDropped.labels(name).inc(dropped.length);
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
}

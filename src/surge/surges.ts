/**
 * @module Surges at run time (`surges:` in limits.yaml): counts the trigger rule's admitted requests in
 * one instance-wide bucket in the counter store, starts the surge when the count passes its threshold,
 * and keeps the surge itself as a guard entry (kind `surge`), so every replica on the store sees it
 * start and end within a second, as it sees bans (guard/redis-state.ts). The request path asks only
 * `active(name)`: one map lookup in the guard's local picture. The gauge `rategate_surge_active` is
 * the guard's (guard/metrics.ts), read from `status()`.
 */
import type { Config, SurgeConfig } from '../config/schema.js';
import type { CompiledRule } from '../config/types.js';
import { formatDuration } from '../config/fields/duration.js';
import type { Guard } from '../guard/guard.js';
import { isLive, type GuardEntry } from '../guard/state.js';
import { fieldOf } from '../guard/view.js';
import { bucketKey } from '../limiter/keys.js';
import type { BucketSpec, Store, StoreLog } from '../limiter/types.js';
import type { SurgeStatus } from '../admin/status-data.js';

/** How often each replica looks for a surge that started or ended (its log lines; the request path reads the picture directly). */
const WATCH_MS = 250;

export interface SurgeSetup {
  readonly guard: Guard;
  /** The counter store: the trigger's instance-wide count lives there. */
  readonly store: Store;
  readonly log: StoreLog;
  readonly config: () => Pick<Config, 'surges'>;
}

/** What GET /admin/surges and the status page show of one surge. */
export interface SurgeInfo {
  readonly name: string;
  readonly active: boolean;
  readonly startedAt: string | null;
  readonly endsAt: string | null;
  readonly reason: string | null;
  readonly who: string | null;
  readonly trigger: { readonly rule: string; readonly above: number; readonly within: string; readonly count: number | null };
  readonly for: string;
  readonly rules: readonly string[];
}

/** The guard entry id of a surge: never an address, so no release reads it as a block or exemption. */
export function surgeId(name: string): string {
  return `surge:${name}`;
}

/** The trigger's bucket: one for the whole instance; `/` is not a rule-name character, so no rule's key collides. */
export function triggerSpec(s: SurgeConfig): BucketSpec {
  return {
    key: bucketKey(`surge/${s.name}:`, 'global'),
    limit: s.trigger.above,
    periodMs: s.trigger.within,
    algorithm: 'sliding-window',
    cost: 1,
    shadow: false,
    onError: 'local',
  };
}

export class Surges {
  private readonly now: () => number;
  /** The surges on at the last look, by name (for the start and end log lines). */
  private readonly seen = new Map<string, GuardEntry>();
  /** Surges whose count call is in flight: a wave does not pile calls up behind a slow store. */
  private readonly counting = new Set<string>();
  /** Admissions not yet added to the store's count, per surge (added by the next call). */
  private readonly pending = new Map<string, number>();
  private byRule: ReadonlyMap<string, readonly SurgeConfig[]> = new Map();
  private indexed: readonly SurgeConfig[] | undefined;
  /** The watch's timer: set only while the table has surges (a table without any costs no timer). */
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly o: SurgeSetup) {
    // The guard's clock: its entries (the surges among them) expire by it.
    this.now = o.guard.now;
    this.configured();
  }

  /** The table was loaded or reloaded: watch while it has surges, not otherwise. */
  configured(): void {
    const want = this.o.config().surges.length > 0;
    if (want && this.timer === undefined) {
      this.timer = setInterval(() => this.watch(), WATCH_MS);
      this.timer.unref();
    } else if (!want && this.timer !== undefined) this.close();
  }

  /** Whether the surge is on now (the request path: one lookup). */
  active(name: string): boolean {
    const e = this.o.guard.view.get(fieldOf('surge', surgeId(name)));
    return e !== undefined && isLive(e, this.now());
  }

  /** Counts an admitted request's rules toward the surges they trigger; never waits, never throws. */
  admitted(rules: readonly CompiledRule[]): void {
    const surges = this.o.config().surges;
    if (surges.length === 0) return;
    if (this.indexed !== surges) this.index(surges);
    for (const rule of rules) {
      const triggered = this.byRule.get(rule.name);
      if (triggered !== undefined) for (const s of triggered) this.count(s);
    }
  }

  private index(surges: readonly SurgeConfig[]): void {
    const byRule = new Map<string, SurgeConfig[]>();
    for (const s of surges) byRule.set(s.trigger.rule, [...(byRule.get(s.trigger.rule) ?? []), s]);
    this.byRule = byRule;
    this.indexed = surges;
  }

  private count(s: SurgeConfig): void {
    // Counted while on too (from zero: start() empties the count), so a wave still going at the end starts it again.
    this.pending.set(s.name, (this.pending.get(s.name) ?? 0) + 1);
    if (!this.counting.has(s.name)) this.flush(s);
  }

  /** Adds what was admitted meanwhile in one call (at most `above` at once): a wave costs one call in flight per surge. */
  private flush(s: SurgeConfig): void {
    const n = Math.min(this.pending.get(s.name) ?? 0, s.trigger.above);
    if (n === 0) return;
    this.pending.set(s.name, (this.pending.get(s.name) ?? 0) - n);
    this.counting.add(s.name);
    this.o.store
      .consume([{ ...triggerSpec(s), cost: n }])
      .then((outcome) => {
        // All-or-nothing: a bucket without room for these `n` means the count passes `above`.
        if (!outcome.buckets[0]!.limited || this.active(s.name)) return;
        this.pending.delete(s.name);
        const reason = `${s.trigger.rule}: more than ${s.trigger.above} admitted within ${formatDuration(s.trigger.within)}`;
        return this.start(s.name, s.for, reason, `surge ${s.name}`).then(() => undefined);
      })
      .catch((err: Error) => this.o.log.warn({ surge: s.name, err: err.message }, `surge ${s.name}: could not count its trigger: ${err.message}`))
      .finally(() => {
        this.counting.delete(s.name);
        this.flush(s);
      });
  }

  /**
   * Starts (or extends) a surge for `forMs`; every replica follows within a second. The trigger's count
   * starts again from zero: what is admitted during the surge decides whether it is still on at its end.
   */
  async start(name: string, forMs: number, reason: string, who: string): Promise<GuardEntry> {
    const now = this.now();
    const entry: GuardEntry = { kind: 'surge', id: surgeId(name), reason, createdAt: now, expiresAt: now + forMs, who };
    await this.o.guard.state.put(entry);
    await this.resetCount(name);
    this.watch();
    return entry;
  }

  /** Ends a surge now, and empties its trigger's count so that it takes a new wave to start it again; the entry ended, or null. */
  async end(name: string): Promise<GuardEntry | null> {
    const removed = await this.o.guard.state.remove('surge', surgeId(name));
    await this.resetCount(name);
    this.watch();
    return removed !== null && isLive(removed, this.now()) ? removed : null;
  }

  private async resetCount(name: string): Promise<void> {
    const s = this.o.config().surges.find((x) => x.name === name);
    if (s !== undefined) await this.o.store.reset(triggerSpec(s));
  }

  /** Every configured surge, on or off, with its trigger's count so far (null when the store does not answer). */
  async list(): Promise<SurgeInfo[]> {
    await this.o.guard.sync();
    this.watch(); // what is listed has been logged
    const out: SurgeInfo[] = [];
    for (const s of this.o.config().surges) {
      const e = this.entry(s.name);
      const count = await this.o.store.peek(triggerSpec(s)).then(
        (b) => s.trigger.above - b.remaining,
        () => null,
      );
      out.push({
        name: s.name,
        active: e !== undefined,
        startedAt: e === undefined ? null : new Date(e.createdAt).toISOString(),
        endsAt: e?.expiresAt == null ? null : new Date(e.expiresAt).toISOString(),
        reason: e?.reason ?? null,
        who: e?.who ?? null,
        trigger: { rule: s.trigger.rule, above: s.trigger.above, within: formatDuration(s.trigger.within), count },
        for: formatDuration(s.for),
        rules: s.limits.map((r) => r.name),
      });
    }
    return out;
  }

  /** The status page's rows: every surge, from this replica's picture (no store call). */
  status(): SurgeStatus[] {
    return this.o.config().surges.map((s) => {
      const e = this.entry(s.name);
      return {
        name: s.name,
        active: e !== undefined,
        since: e === undefined ? null : new Date(e.createdAt).toISOString(),
        until: e?.expiresAt == null ? null : new Date(e.expiresAt).toISOString(),
        trigger: `${s.trigger.rule} above ${s.trigger.above} within ${formatDuration(s.trigger.within)}, for ${formatDuration(s.for)}`,
      };
    });
  }

  private entry(name: string): GuardEntry | undefined {
    const e = this.o.guard.view.get(fieldOf('surge', surgeId(name)));
    return e !== undefined && isLive(e, this.now()) ? e : undefined;
  }

  /** Logs each surge's start and end once per replica, as this replica sees them. */
  private watch(): void {
    for (const s of this.o.config().surges) {
      const e = this.entry(s.name);
      const was = this.seen.get(s.name);
      if (e !== undefined && was?.createdAt !== e.createdAt) {
        this.seen.set(s.name, e);
        const until = new Date(e.expiresAt ?? 0).toISOString();
        this.o.log.warn(
          { surge: s.name, event: 'start', until, reason: e.reason, by: e.who },
          `surge ${s.name} on until ${until} (${e.reason}; by ${e.who ?? '?'})`,
        );
      } else if (e === undefined && was !== undefined) {
        this.seen.delete(s.name);
        const early = was.expiresAt !== null && was.expiresAt > this.now();
        this.o.log.warn({ surge: s.name, event: 'end', early }, `surge ${s.name} off${early ? ' (ended early)' : ' (its time is up)'}`);
      }
    }
  }

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}

/**
 * @module Surges at run time (`surges:` in limits.yaml): counts the trigger rule's requests the upstream
 * answered with one of the trigger's statuses, at most `perNetwork` from each client network and none
 * while the surge is on, in one instance-wide bucket in the counter store, starts the surge when the
 * count passes its threshold,
 * and keeps the surge itself as a guard entry (kind `surge`), so every replica on the store sees it
 * start and end within a second, as it sees bans (guard/redis-state.ts). The request path asks only
 * `active(name)`: one map lookup in the guard's local picture. The gauge `rategate_surge_active` is
 * the guard's (guard/metrics.ts), read from `status()`.
 */
import type { Config, SurgeConfig } from '../config/schema.js';
import type { CompiledRule } from '../config/types.js';
import { formatDuration } from '../config/fields/duration.js';
import { perNetworkOf } from '../config/fields/surge.js';
import { networkOf } from '../identity/ip.js';
import { isLive, type GuardEntry } from '../guard/entry.js';
import type { GuardState } from '../guard/state.js';
import { fieldOf } from '../guard/view.js';
import type { Store, StoreLog } from '../limiter/types.js';
import { NetworkShares } from './network-shares.js';
import type { SurgeInfo, SurgeSummary } from './report.js';
import { countedStatuses, samePrefix, surgeId, triggerReason, triggerSpec, type Trigger } from './trigger.js';

export { surgeId, triggerSpec } from './trigger.js';

/** How often each replica looks for a surge that started or ended (its log lines; the request path reads the picture directly). */
const WATCH_MS = 250;

/** The one network of every client whose address the gateway could not read: together they have one share. */
const UNREAD_NETWORK = 'unknown';

export interface SurgeSetup {
  /** The guard's replicated state: a surge is one of its entries (kind `surge`). */
  readonly state: GuardState;
  /** The guard's clock: its entries (the surges among them) expire by it. */
  readonly now: () => number;
  /** The counter store: the trigger's instance-wide count lives there. */
  readonly store: Store;
  readonly log: StoreLog;
  readonly config: () => Pick<Config, 'surges'>;
}

export class Surges {
  private readonly now: () => number;
  /** The surges on at the last look, by name (for the start and end log lines). */
  private readonly seen = new Map<string, GuardEntry>();
  /** Surges whose count call is in flight: a wave does not pile calls up behind a slow store. */
  private readonly counting = new Set<string>();
  /** Admissions not yet added to the store's count, per surge (added by the next call). */
  private readonly pending = new Map<string, number>();
  private byRule: ReadonlyMap<string, readonly Trigger[]> = new Map();
  private byName: ReadonlyMap<string, Trigger> = new Map();
  private indexed: readonly SurgeConfig[] | undefined;
  /** The watch's timer: set only while the table has surges (a table without any costs no timer). */
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly o: SurgeSetup) {
    this.now = o.now;
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
    const e = this.o.state.view.get(fieldOf('surge', surgeId(name)));
    return e !== undefined && isLive(e, this.now());
  }

  /**
   * Counts a forwarded request by the upstream's answer toward the surges its rules trigger; `client` is
   * the client's address (its network's share). Never waits, never throws.
   */
  answered(rules: readonly CompiledRule[], status: number, client: string): void {
    const surges = this.o.config().surges;
    if (surges.length === 0) return;
    if (this.indexed !== surges) this.index(surges);
    for (let i = 0; i < rules.length; i++) {
      const triggered = this.byRule.get(rules[i]!.name);
      if (triggered !== undefined) for (const t of triggered) this.count(t, status, client);
    }
  }

  /** Compiles each surge's trigger; a trigger whose share settings did not change keeps its networks' shares. */
  private index(surges: readonly SurgeConfig[]): void {
    const byRule = new Map<string, Trigger[]>();
    const byName = new Map<string, Trigger>();
    for (const s of surges) {
      const perNetwork = perNetworkOf(s.trigger);
      const was = this.byName.get(s.name);
      const same =
        was !== undefined &&
        was.shares.perNetwork === perNetwork &&
        was.shares.withinMs === s.trigger.within &&
        samePrefix(was.surge, s);
      const t: Trigger = {
        surge: s,
        counted: countedStatuses(s.trigger.statuses),
        shares: same ? was.shares : new NetworkShares(perNetwork, s.trigger.within),
      };
      byRule.set(s.trigger.rule, [...(byRule.get(s.trigger.rule) ?? []), t]);
      byName.set(s.name, t);
    }
    this.byRule = byRule;
    this.byName = byName;
    this.indexed = surges;
  }

  private count(t: Trigger, status: number, client: string): void {
    const s = t.surge;
    // Security: an answer the operator did not name (a junk sign-up's 422) is free to send, so it does not
    // count; nor does what is answered while the surge is on, so a wave it admits cannot keep it on past `for`.
    if (t.counted[status] !== 1 || this.active(s.name)) return;
    const prefix = s.trigger.networkPrefix;
    // Security: one network (a home /56, a rented /24) adds at most perNetwork, so it cannot start the surge alone.
    if (!t.shares.take(networkOf(client, prefix.ipv4, prefix.ipv6) ?? UNREAD_NETWORK, this.now())) return;
    this.pending.set(s.name, (this.pending.get(s.name) ?? 0) + 1);
    if (!this.counting.has(s.name)) this.flush(s);
  }

  /** Adds what was counted meanwhile in one call (at most `above` at once): a wave costs one call in flight per surge. */
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
        return this.start(s.name, s.for, triggerReason(s), `surge ${s.name}`).then(() => undefined);
      })
      .catch((err: Error) =>
        this.o.log.warn(
          { surge: s.name, err: err.message },
          `surge ${s.name}: could not count its trigger: ${err.message}`,
        ),
      )
      .finally(() => {
        this.counting.delete(s.name);
        this.flush(s);
      });
  }

  /**
   * Starts (or extends) a surge for `forMs`; every replica follows within a second. The trigger's count
   * starts again from zero and counts nothing while the surge is on: it ends after `forMs` however the
   * wave goes on, and it takes a new count past `above` after its end to start it again.
   */
  async start(name: string, forMs: number, reason: string, who: string): Promise<GuardEntry> {
    const now = this.now();
    const entry: GuardEntry = { kind: 'surge', id: surgeId(name), reason, createdAt: now, expiresAt: now + forMs, who };
    await this.o.state.put(entry);
    this.forget(name);
    await this.resetCount(name);
    this.watch();
    return entry;
  }

  /** Ends a surge now, and empties its trigger's count so that it takes a new wave to start it again; the entry ended, or null. */
  async end(name: string): Promise<GuardEntry | null> {
    const removed = await this.o.state.remove('surge', surgeId(name));
    this.forget(name);
    await this.resetCount(name);
    this.watch();
    return removed !== null && isLive(removed, this.now()) ? removed : null;
  }

  /** This replica's part of a count that starts again: what it had not added yet, and the networks' shares. */
  private forget(name: string): void {
    this.pending.delete(name);
    this.byName.get(name)?.shares.clear();
  }

  private async resetCount(name: string): Promise<void> {
    const s = this.o.config().surges.find((x) => x.name === name);
    if (s !== undefined) await this.o.store.reset(triggerSpec(s));
  }

  /** Every configured surge, on or off, with its trigger's count so far (null when the store does not answer). */
  async list(): Promise<SurgeInfo[]> {
    await this.o.state.sync();
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
        trigger: {
          rule: s.trigger.rule,
          above: s.trigger.above,
          within: formatDuration(s.trigger.within),
          statuses: s.trigger.statuses,
          perNetwork: perNetworkOf(s.trigger),
          count,
        },
        for: formatDuration(s.for),
        rules: s.limits.map((r) => r.name),
      });
    }
    return out;
  }

  /** The status page's rows: every surge, from this replica's picture (no store call). */
  status(): SurgeSummary[] {
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
    const e = this.o.state.view.get(fieldOf('surge', surgeId(name)));
    return e !== undefined && isLive(e, this.now()) ? e : undefined;
  }

  /** Logs each surge's start and end once per replica, as this replica sees them. */
  private watch(): void {
    for (const s of this.o.config().surges) {
      const e = this.entry(s.name);
      const was = this.seen.get(s.name);
      if (e !== undefined && was?.createdAt !== e.createdAt) {
        this.seen.set(s.name, e);
        // Started, perhaps by another replica: this one's part of the count starts again too.
        this.forget(s.name);
        const until = new Date(e.expiresAt ?? 0).toISOString();
        this.o.log.warn(
          { surge: s.name, event: 'start', until, reason: e.reason, by: e.who },
          `surge ${s.name} on until ${until} (${e.reason}; by ${e.who ?? '?'})`,
        );
      } else if (e === undefined && was !== undefined) {
        this.seen.delete(s.name);
        const early = was.expiresAt !== null && was.expiresAt > this.now();
        this.o.log.warn(
          { surge: s.name, event: 'end', early },
          `surge ${s.name} off${early ? ' (ended early)' : ' (its time is up)'}`,
        );
      }
    }
  }

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}

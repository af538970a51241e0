/**
 * @module The gateway's attack-day runtime, one per process: the replicated state (state.ts,
 * redis-state.ts) and its local view of runtime blocks and exemptions, and beside it the parts that share
 * that state — bans (bans.ts), in-flight slots (slots.ts), surges (surge/surges.ts) — each behind the
 * stage that uses it; the triage sketch. The per-snapshot rules come from the request policy
 * (guard/rules.ts). Every lookup here is O(1) and reads no store.
 */
import type { CidrSet } from '../identity/index.js';
import type { StoreLog } from '../limiter/types.js';
import type { GuardMetrics } from './metrics.js';
import type { GuardEntry } from './entry.js';
import type { GuardState } from './state.js';
import { displayKey } from '../keys/index.js';
import { TopLimited } from './top-keys.js';
import { LimitedComposites } from './limited-composites.js';
import type { GuardView } from './view.js';
import type { Surges } from '../surge/surges.js';
import { Bans } from './bans.js';
import { InFlightSlots } from './slots.js';

export class Guard {
  readonly bans: Bans;
  readonly slots: InFlightSlots;
  /** The keys most limited recently, shown as an operator reads them (a 429 only counts its key). */
  readonly top = new TopLimited({ display: displayKey });
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
    this.bans = new Bans(state, log, now, () => this.metrics);
    this.slots = new InFlightSlots(state);
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

  /** Whether the first stage has anything to look at (runtime blocks or IP bans): else it is skipped. */
  hasEarly(): boolean {
    const v = this.view;
    return v.blocks.size > 0 || v.ipBans.size > 0;
  }

  runtimeBlocks(): CidrSet | null {
    const b = this.view.blocks;
    return b.size > 0 ? b : null;
  }

  runtimeExempts(): CidrSet | null {
    const e = this.view.exempts;
    return e.size > 0 ? e : null;
  }

  async close(): Promise<void> {
    this.slots.close();
    this.surges?.close();
    await this.state.close();
  }
}

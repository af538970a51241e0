/**
 * @module The log lines of the shared store's state: each change once, never a line per request, and
 * at most a few lines per quiet period when the store flaps.
 *
 * A store that fails now and then (a timeout under load) turns the fault policy on and off again and
 * again. Writing every change would put a line pair in the log per hiccup, so: a failure is written at
 * once unless a failure line was written within `quietMs`; then it is counted, and when the quiet
 * period ends one line says either that the store is still failing or how often it flapped meanwhile.
 * A recovery is written at once when a failure was written, so the last line always tells the truth.
 */
import { systemClock, type Clock } from './clock.js';
import type { StoreLog } from './types.js';

export interface StoreStateLogOptions {
  readonly log: StoreLog;
  /** Fields on every line (which store, its redacted URL). */
  readonly where: Readonly<Record<string, unknown>>;
  /** What decides meanwhile, for the failure lines: e.g. `onError: local`. */
  readonly policy: string;
  readonly clock?: Clock;
  /** Default 30 s. */
  readonly quietMs?: number;
}

export class StoreStateLog {
  /** What the log last said. */
  private reported: 'ok' | 'failing' = 'ok';
  private failing = false;
  private lastFailureLineAt = -Infinity;
  /** Failures since the last failure line that no line has mentioned. */
  private unreported = 0;
  private cause: string | undefined;
  private pending = false;
  private readonly clock: Clock;
  private readonly quietMs: number;

  constructor(private readonly o: StoreStateLogOptions) {
    this.clock = o.clock ?? systemClock;
    this.quietMs = o.quietMs ?? 30_000;
  }

  /** Start-up gave up waiting for a first connection. */
  unreachableAtStart(cause: string | undefined): void {
    this.failing = true;
    this.cause = cause;
    this.o.log.warn({ ...this.o.where, err: cause }, `store unreachable at start: serving under ${this.o.policy} until it connects`);
    this.wrote('failing');
  }

  /** Decisions went to the fault policy. */
  failed(cause: string | undefined): void {
    this.failing = true;
    this.cause = cause;
    if (this.reported === 'failing') return;
    if (this.clock.now() - this.lastFailureLineAt >= this.quietMs) this.writeFailing();
    else {
      this.unreported++;
      this.settleLater();
    }
  }

  /** Decisions are the shared store's again (`how`: the line to write when the log said it was failing). */
  recovered(how = 'store recovered: decisions are shared again'): void {
    this.failing = false;
    if (this.reported === 'ok') return;
    this.o.log.info(this.o.where, how);
    this.reported = 'ok';
  }

  private writeFailing(): void {
    const flaps = this.unreported > 0 ? { failuresSinceLastLine: this.unreported } : {};
    this.o.log.warn({ ...this.o.where, err: this.cause, ...flaps }, `store failing: decisions follow ${this.o.policy} until it recovers`);
    this.wrote('failing');
  }

  private wrote(state: 'failing'): void {
    this.reported = state;
    this.lastFailureLineAt = this.clock.now();
    this.unreported = 0;
  }

  /** At the end of the quiet period, say what the suppressed failures amounted to. */
  private settleLater(): void {
    if (this.pending) return;
    this.pending = true;
    this.clock.after(Math.max(0, this.lastFailureLineAt + this.quietMs - this.clock.now()), () => {
      this.pending = false;
      if (this.failing && this.reported === 'ok') this.writeFailing();
      else if (this.unreported > 0) {
        this.o.log.warn(
          { ...this.o.where, err: this.cause, failuresSinceLastLine: this.unreported },
          `store flapping: it failed and recovered ${this.unreported} times in ${Math.round(this.quietMs / 1000)} s; decisions are shared again`,
        );
        this.lastFailureLineAt = this.clock.now();
        this.unreported = 0;
      }
    });
  }
}

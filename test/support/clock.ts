/** @module A fake clock: tests move time by hand instead of sleeping. Its timers fire as time is moved past them. */

interface Timer {
  readonly at: number;
  readonly seq: number;
  readonly fn: () => void;
}

export class FakeClock {
  private timers: Timer[] = [];
  private seq = 0;

  constructor(private ms = Date.UTC(2026, 10, 21, 19, 0, 0)) {}

  /** Bound so it can be passed where a `() => number` clock is expected. */
  readonly now = (): number => this.ms;

  /** The limiter's Clock.after: runs `fn` once when time is moved to `now + ms`; returns its cancel. */
  readonly after = (ms: number, fn: () => void): (() => void) => {
    const timer: Timer = { at: this.ms + ms, seq: this.seq++, fn };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  };

  /** Timers not yet fired. */
  get pendingTimers(): number {
    return this.timers.length;
  }

  /** Moves time on, firing each timer due on the way at its own time, in order. */
  advance(ms: number): void {
    const end = this.ms + ms;
    for (;;) {
      const due = this.timers.filter((t) => t.at <= end).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!due) break;
      this.timers = this.timers.filter((t) => t !== due);
      this.ms = Math.max(this.ms, due.at);
      due.fn();
    }
    this.ms = end;
  }

  set(ms: number): void {
    this.ms = ms;
  }
}

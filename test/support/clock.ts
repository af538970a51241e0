/** @module A fake clock: tests move time by hand instead of sleeping. */

export class FakeClock {
  constructor(private ms = Date.UTC(2026, 10, 21, 19, 0, 0)) {}

  /** Bound so it can be passed where a `() => number` clock is expected. */
  readonly now = (): number => this.ms;

  advance(ms: number): void {
    this.ms += ms;
  }

  set(ms: number): void {
    this.ms = ms;
  }
}

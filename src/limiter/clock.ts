/** @module Time and timers for the limiter's own timing (the breaker), injectable so tests move time by hand. */

export interface Clock {
  /** Epoch ms. */
  now(): number;
  /** Runs `fn` once after `ms`; the returned function cancels it. Never keeps the process alive. */
  after(ms: number, fn: () => void): () => void;
}

export const systemClock: Clock = {
  now: Date.now,
  after(ms, fn) {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
};

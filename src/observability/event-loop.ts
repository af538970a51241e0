/**
 * @module How late the event loop runs a timer: every sample's lateness into a histogram
 * (rategate_event_loop_delay_seconds), so an alert can take a quantile over any window.
 *
 * prom-client's `nodejs_eventloop_lag_p99_seconds` is a percentile per scrape (reset at each one) of the
 * interval between the delay monitor's ticks, sampling interval included: with a 100 ms interval its
 * floor is 0.1 on an idle gateway, and percentiles of separate scrapes cannot be combined over 5 minutes.
 * This one records only the lateness, and its buckets add up over any range.
 */
import type { FastHistogram } from './histogram.js';

/** Watches the loop until stopped; the timer never keeps the process alive. */
export function watchEventLoop(h: FastHistogram, everyMs: number): { stop(): void } {
  let timer: NodeJS.Timeout | undefined;
  let due = performance.now() + everyMs;
  const tick = (): void => {
    const now = performance.now();
    h.observe(Math.max(0, now - due) / 1000);
    due = now + everyMs;
    timer = setTimeout(tick, everyMs);
    timer.unref();
  };
  timer = setTimeout(tick, everyMs);
  timer.unref();
  return { stop: () => clearTimeout(timer) };
}

/**
 * Issue 40: rategate_event_loop_delay_seconds records how late the loop ran its timer (not the interval
 * between ticks, which prom-client's p99 includes), so an idle loop shows ~0 and a blocked one its stall.
 */
import { describe, expect, it } from 'vitest';
import { Metrics } from '../../src/observability/metrics.js';
import { FastHistogram } from '../../src/observability/histogram.js';
import { watchEventLoop } from '../../src/observability/event-loop.js';
import { eventually, pause } from '../support/eventually.js';

describe('the event-loop delay histogram', () => {
  it('records a stall of the loop as its lateness, and on-time ticks under 100 ms', async () => {
    const h = new FastHistogram('t', 't', [0.1, 0.25, 1]);
    const watch = watchEventLoop(h, 20);
    try {
      // Time is the subject: a few ticks on an idle loop first.
      await pause(200);
      expect(h.labels().counts[0]).toBeGreaterThan(0);
      const until = performance.now() + 400;
      while (performance.now() < until); // blocks the loop for 400 ms
      await eventually(() => h.labels().counts[2]! > 0, {
        what: 'the stall recorded between 250 ms and 1 s',
        withinMs: 2_000,
      });
      // The stall is one tick 380 ms late, not the 400 ms interval: nothing went past 1 s.
      expect(h.labels().count - h.labels().counts[0]! - h.labels().counts[1]! - h.labels().counts[2]!).toBe(0);
    } finally {
      watch.stop();
    }
  });

  it('is exported by a serving gateway, and the gateway-made 5xx start at 0', async () => {
    const m = new Metrics();
    try {
      const text = await m.registry.metrics();
      expect(text).toMatch(/^rategate_event_loop_delay_seconds_bucket\{le="0.1"\} \d+$/m);
      for (const code of ['500', '502', '503', '504'])
        expect(text).toContain(`rategate_gateway_responses_total{code="${code}"} 0`);
    } finally {
      m.stop();
    }
  });
});

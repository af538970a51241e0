import client from 'prom-client';
import { describe, expect, it } from 'vitest';
import { FastHistogram } from '../../src/observability/histogram.js';

const BOUNDS = [0.001, 0.005, 0.01, 0.1, 1];
const SAMPLES = [0.0005, 0.001, 0.002, 0.0099, 0.05, 0.5, 2, 7, 0.001, 0.3];

/** The same observations in prom-client's Histogram and in FastHistogram, each in its own registry. */
async function both(
  labelled: boolean,
): Promise<{ theirs: string; ours: string; oursJson: unknown; theirsJson: unknown }> {
  const a = new client.Registry();
  const b = new client.Registry();
  const theirs = new client.Histogram({
    name: 'h_seconds',
    help: 'A histogram.',
    buckets: BOUNDS,
    registers: [a],
    ...(labelled ? { labelNames: ['status_class'] } : {}),
  });
  const ours = new FastHistogram('h_seconds', 'A histogram.', BOUNDS, labelled ? 'status_class' : undefined);
  b.registerMetric(ours as unknown as client.Metric);
  SAMPLES.forEach((v, i) => {
    const cls = i % 3 === 0 ? '5xx' : '2xx';
    if (labelled) {
      theirs.labels(cls).observe(v);
      ours.labels(cls).observe(v);
    } else {
      theirs.observe(v);
      ours.observe(v);
    }
  });
  if (labelled) ours.labels('4xx'); // taken but never observed: not shown, as with prom-client
  return {
    theirs: await a.metrics(),
    ours: await b.metrics(),
    theirsJson: await a.getMetricsAsJSON(),
    oursJson: await b.getMetricsAsJSON(),
  };
}

describe('FastHistogram', () => {
  it('prints exactly what prom-client prints for the same observations, without labels', async () => {
    const r = await both(false);
    expect(r.ours).toBe(r.theirs);
    expect(r.ours).toMatch(/h_seconds_bucket\{le="0.01"\} 5\n/);
    expect(r.ours).toMatch(/h_seconds_count 10\n/);
  });

  it('prints exactly what prom-client prints with a label, and the same JSON the workers aggregate', async () => {
    const r = await both(true);
    expect(r.ours).toBe(r.theirs);
    // The same values; prom-client also carries an empty `exemplar` field, which the aggregation ignores.
    const withoutExemplars = (j: unknown): unknown =>
      JSON.parse(JSON.stringify(j, (k, v: unknown) => (k === 'exemplar' ? undefined : v)));
    expect(withoutExemplars(r.oursJson)).toEqual(withoutExemplars(r.theirsJson));
    expect(r.ours).toMatch(/h_seconds_count\{status_class="5xx"\} 4\n/);
    expect(r.ours).not.toMatch(/4xx/);
  });

  it('shows a histogram without labels from the start, with zero counts', async () => {
    const reg = new client.Registry();
    reg.registerMetric(new FastHistogram('idle_seconds', 'Idle.', BOUNDS) as unknown as client.Metric);
    expect(await reg.metrics()).toMatch(
      /idle_seconds_bucket\{le="\+Inf"\} 0\nidle_seconds_sum 0\nidle_seconds_count 0/,
    );
  });

  it('prints exactly what prom-client prints with two labels (code_class and decision, as the RED histogram has)', async () => {
    const a = new client.Registry();
    const b = new client.Registry();
    const theirs = new client.Histogram({
      name: 'red_seconds',
      help: 'Two labels.',
      buckets: BOUNDS,
      registers: [a],
      labelNames: ['code_class', 'decision'],
    });
    const ours = new FastHistogram('red_seconds', 'Two labels.', BOUNDS, ['code_class', 'decision']);
    b.registerMetric(ours as unknown as client.Metric);
    SAMPLES.forEach((v, i) => {
      const [cls, decision] = i % 3 === 0 ? ['4xx', 'limited'] : ['2xx', 'allowed'];
      theirs.labels(cls, decision).observe(v);
      ours.labels(cls, decision).observe(v);
    });
    expect(await b.metrics()).toBe(await a.metrics());
    expect(await b.metrics()).toMatch(/red_seconds_count\{code_class="4xx",decision="limited"\} 4\n/);
  });
});

/**
 * @module How a module's metrics are made: each from its name, its help text looked up in the module's
 * table of names (so the table reads as the list of what is counted, and a metric without a help text
 * does not compile), and what sets it apart (labels, how `--workers` merges series, what a scrape reads
 * first), registered on the gateway's one registry.
 */
import client from 'prom-client';
import { FastHistogram } from './histogram.js';

/** What the caller says beyond the name: everything prom-client takes, but the help (from the table) and the registry. */
type Rest<C> = Omit<C, 'name' | 'help' | 'registers'>;

export interface MetricMaker<N extends string> {
  counter<L extends string = string>(name: N, rest?: Rest<client.CounterConfiguration<L>>): client.Counter<L>;
  gauge<L extends string = string>(name: N, rest?: Rest<client.GaugeConfiguration<L>>): client.Gauge<L>;
  /** The request path's histogram (histogram.ts): `labelNames` undefined for one series without labels. */
  histogram(name: N, bounds: readonly number[], labelNames?: string | readonly string[]): FastHistogram;
}

export function metricMaker<N extends string>(
  registry: client.Registry,
  help: Readonly<Record<N, string>>,
): MetricMaker<N> {
  const registers = [registry];
  return {
    counter: (name, rest) => new client.Counter({ ...rest, name, help: help[name], registers }),
    gauge: (name, rest) => new client.Gauge({ ...rest, name, help: help[name], registers }),
    histogram: (name, bounds, labelNames) => {
      const metric = new FastHistogram(name, help[name], bounds, labelNames);
      // prom-client reads a metric through name, help, type, aggregator and get(): FastHistogram has them.
      registry.registerMetric(metric as unknown as client.Metric);
      return metric;
    },
  };
}

/**
 * A one-label counter's `inc` by label value, each child made once: prom-client's `labels()` hashes its
 * arguments on every call, a cost a flood of 429s would pay per request. For label values from a fixed
 * few (status codes, reasons): the children are kept for the process's life.
 */
export function incByLabel<V extends string | number>(counter: client.Counter): (value: V) => void {
  const children = new Map<V, client.Counter.Internal>();
  return (value) => {
    let c = children.get(value);
    if (c === undefined) children.set(value, (c = counter.labels(String(value))));
    c.inc();
  };
}

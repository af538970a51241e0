/**
 * @module A Prometheus histogram for the request path: `observe` is a bucket search and three adds.
 *
 * prom-client's `Histogram#observe` builds a label object, validates it and hashes it into a string on
 * every call (about 1 µs; the gateway observes twice per request). This one keeps each label value's
 * series as plain numbers and turns them into prom-client's value list only when scraped, so the
 * registry prints it, and the workers' AggregatorRegistry sums it, exactly like prom-client's own.
 */

interface MetricValue {
  value: number;
  labels: Record<string, string | number>;
  metricName: string;
}

/** One label value's buckets (not cumulative; made cumulative at scrape), sum and count. */
export class HistogramSeries {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length);
  }

  observe(value: number): void {
    const b = this.bounds;
    for (let i = 0; i < b.length; i++) {
      if (value <= b[i]!) {
        this.counts[i]!++;
        break;
      }
    }
    this.sum += value;
    this.count++;
  }
}

export class FastHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  /** Each label-value combination's series, and the values it stands for (keyed by the values joined). */
  private readonly series = new Map<string, { readonly values: readonly string[]; readonly series: HistogramSeries }>();
  /** The series of a histogram without labels, kept so `observe` needs no lookup. */
  private unlabelled: HistogramSeries | undefined;
  readonly labelNames: readonly string[];

  /** `labelNames` undefined: one series without labels (`labels()` with no argument, or `observe`). */
  constructor(
    readonly name: string,
    readonly help: string,
    private readonly bounds: readonly number[],
    labelNames?: string | readonly string[],
  ) {
    this.labelNames = labelNames === undefined ? [] : typeof labelNames === 'string' ? [labelNames] : labelNames;
    // Like prom-client: a histogram without labels shows its (zero) series from the start.
    if (this.labelNames.length === 0) this.unlabelled = this.labels();
  }

  /** The series of one value per label name, in their order, to keep and observe into (created on first use). */
  labels(...values: string[]): HistogramSeries {
    const key = values.join('\u0000');
    let s = this.series.get(key);
    if (s === undefined) {
      s = { values, series: new HistogramSeries(this.bounds) };
      this.series.set(key, s);
    }
    return s.series;
  }

  observe(value: number): void {
    (this.unlabelled ??= this.labels()).observe(value);
  }

  /** prom-client's metric shape: what Registry#metrics and getMetricsAsJSON read. */
  get(): { name: string; help: string; type: string; aggregator: string; values: MetricValue[] } {
    const values: MetricValue[] = [];
    const labelled = this.labelNames.length > 0;
    for (const { values: labelValues, series: s } of this.series.values()) {
      // A labelled series shows once observed, as with prom-client (children may be taken up front).
      if (labelled && s.count === 0) continue;
      const own: Record<string, string> = {};
      this.labelNames.forEach((n, i) => (own[n] = labelValues[i] ?? ''));
      let acc = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        acc += s.counts[i]!;
        values.push({ value: acc, labels: { le: this.bounds[i]!, ...own }, metricName: `${this.name}_bucket` });
      }
      values.push({ value: s.count, labels: { le: '+Inf', ...own }, metricName: `${this.name}_bucket` });
      values.push({ value: s.sum, labels: { ...own }, metricName: `${this.name}_sum` });
      values.push({ value: s.count, labels: { ...own }, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    this.series.clear();
    this.unlabelled = this.labelNames.length === 0 ? this.labels() : undefined;
  }
}

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
  private readonly series = new Map<string, HistogramSeries>();
  /** The series of a histogram without labels, kept so `observe` needs no lookup. */
  private unlabelled: HistogramSeries | undefined;

  /** `labelName` undefined: one series without labels (`labels()` with no argument, or `observe`). */
  constructor(
    readonly name: string,
    readonly help: string,
    private readonly bounds: readonly number[],
    readonly labelName?: string,
  ) {
    // Like prom-client: a histogram without labels shows its (zero) series from the start.
    if (labelName === undefined) this.unlabelled = this.labels();
  }

  /** The series of one label value, to keep and observe into (created on first use). */
  labels(value = ''): HistogramSeries {
    let s = this.series.get(value);
    if (s === undefined) {
      s = new HistogramSeries(this.bounds);
      this.series.set(value, s);
    }
    return s;
  }

  observe(value: number): void {
    (this.unlabelled ??= this.labels()).observe(value);
  }

  /** prom-client's metric shape: what Registry#metrics and getMetricsAsJSON read. */
  get(): { name: string; help: string; type: string; aggregator: string; values: MetricValue[] } {
    const values: MetricValue[] = [];
    for (const [labelValue, s] of this.series) {
      // A labelled series shows once observed, as with prom-client (children may be taken up front).
      if (this.labelName !== undefined && s.count === 0) continue;
      const own: Record<string, string> = this.labelName === undefined ? {} : { [this.labelName]: labelValue };
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
    this.unlabelled = this.labelName === undefined ? this.labels() : undefined;
  }
}

/** @module Every Prometheus metric of the gateway, defined in one place. Labels never carry an IP, a token or an account. */
import client from 'prom-client';
import { UPSTREAM_ERROR_REASONS } from '../http/errors.js';
import { FastHistogram } from './histogram.js';
import { STORE_ERROR_REASONS } from '../limiter/errors.js';
import type { LocalRejectionSource, StoreObserver } from '../limiter/types.js';
import { VERSION } from './version.js';
import { ADMISSION_REFUSALS, type AdmissionObserver } from '../proxy/admission.js';

/**
 * How often the event-loop delay histogram (prom-client's `nodejs_eventloop_lag_{min,max,mean,p50,p90,p99}_seconds`)
 * samples, in ms. prom-client's default is 10: a timer waking an idle gateway 100 times a second. A
 * stall that spans a sample is recorded whatever the interval; `nodejs_eventloop_lag_seconds` is
 * measured at each scrape and does not depend on it.
 */
export const EVENT_LOOP_SAMPLE_MS = 100;

/** The values of rategate_requests_total's `decision` label. */
export const DECISIONS = ['allowed', 'limited', 'shadow_limited'] as const;
export type Decision = (typeof DECISIONS)[number];
/** The values of rategate_upstream_duration_seconds's `status_class` label. */
export const STATUS_CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'] as const;

/**
 * Label values known in advance: their series exist at 0 from the start, so that an alert on
 * `increase(...)` sees the first failure (a series born at 1 has no increase to show).
 */
export const RELOAD_RESULTS = ['success', 'error'] as const;

/**
 * Per-rule decision counts as plain numbers: the request path adds to them, and a scrape hands the
 * increase since the last scrape to prom-client (whose `inc` hashes its label set on every call).
 */
export class RuleCounters {
  allowed = 0;
  limited = 0;
  shadowLimited = 0;
  nearLimit = 0;
  /** What the last scrape already handed over. */
  readonly exported = { allowed: 0, limited: 0, shadowLimited: 0, nearLimit: 0 };
}

export class Metrics {
  readonly registry = new client.Registry();

  private readonly ruleCounters = new Map<string, RuleCounters>();

  readonly requests: client.Counter<'rule' | 'decision'> = new client.Counter({
    name: 'rategate_requests_total',
    help: 'Requests checked against a rule, by rule and decision (allowed, limited, shadow_limited).',
    labelNames: ['rule', 'decision'] as const,
    registers: [this.registry],
    collect: () => this.flushRuleCounts(),
  });
  readonly nearLimit: client.Counter<'rule'> = new client.Counter({
    name: 'rategate_near_limit_total',
    help: 'Admitted requests that left their bucket at or below 20% of its limit.',
    labelNames: ['rule'] as const,
    registers: [this.registry],
    collect: () => this.flushRuleCounts(),
  });
  /** Observed on every request: FastHistogram, not prom-client's (see histogram.ts). */
  readonly storeDuration = this.register(
    new FastHistogram(
      'rategate_store_duration_seconds',
      'Time of one store decision (all buckets of a request).',
      [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25],
    ),
  );
  readonly storeErrors = new client.Counter({
    name: 'rategate_store_errors_total',
    help: 'Store calls that failed, by reason.',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly storeFallbackActive = new client.Gauge({
    name: 'rategate_store_fallback_active',
    help: '1 while the store is failing and its onError policy is in force.',
    registers: [this.registry],
  });
  readonly storeRefundFailures = new client.Counter({
    name: 'rategate_store_refund_failures_total',
    help: 'Cross-slot refunds that failed: the charge stays until the bucket window or refill passes it (under-admission, never over).',
    registers: [this.registry],
  });
  readonly storeLocalRejections = new client.Counter({
    name: 'rategate_store_local_rejections_total',
    help: 'Requests rejected without the shared store deciding, by source: blocked_cache (a bucket known to be limited until a time) or fallback (the local count of onError: local while the store fails).',
    labelNames: ['source'] as const,
    registers: [this.registry],
    collect: () => this.flushLocalRejections(),
  });
  /** Observed once per script call, which at load carries many requests. */
  readonly storeBatchRequests = this.register(
    new FastHistogram('rategate_store_batch_requests', 'Requests carried by one Redis script call of the batcher.', [1, 2, 4, 8, 16, 32, 64]),
  );
  readonly upstreamDuration = this.register(
    new FastHistogram(
      'rategate_upstream_duration_seconds',
      'Time from forwarding a request to the upstream response headers, by status class.',
      [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      'status_class',
    ),
  );
  readonly upstreamErrors = new client.Counter({
    name: 'rategate_upstream_errors_total',
    help: 'Upstream failures answered by the gateway, by reason.',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly configReloads = new client.Counter({
    name: 'rategate_config_reloads_total',
    help: 'Config reloads, by result (success, error).',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  // -- Operations (SPEC §6): reload state, store state and build, for alerts. In `--workers` mode the
  // primary sums series over workers; these say how to combine theirs instead.
  readonly configLastReloadSuccessful = new client.Gauge({
    name: 'rategate_config_last_reload_successful',
    help: '1 when the last config load or reload succeeded, 0 when it was refused (the previous table stays in force).',
    registers: [this.registry],
    aggregator: 'min',
  });
  readonly configLastReloadSuccessTimestamp = new client.Gauge({
    name: 'rategate_config_last_reload_success_timestamp_seconds',
    help: 'Unix time of the last successful config load or reload.',
    registers: [this.registry],
    aggregator: 'min',
  });
  readonly buildInfo = new client.Gauge({
    name: 'rategate_build_info',
    help: 'Always 1; the labels say which rategate and which Node.js run.',
    labelNames: ['version', 'node'] as const,
    registers: [this.registry],
    aggregator: 'first',
  });
  /** Asked at each scrape for rategate_store_up (set by the composition root: a bounded, cached check). */
  storeProbe: (() => Promise<boolean>) | undefined;
  readonly storeUp: client.Gauge = new client.Gauge({
    name: 'rategate_store_up',
    help: '1 while decisions come from the store: every key has a master, none is failing, each answers as a master (always 1 for memory); 0 while some decisions follow onError.',
    registers: [this.registry],
    aggregator: 'min',
    collect: async () => {
      if (this.storeProbe) this.storeUp.set((await this.storeProbe()) ? 1 : 0);
    },
  });

  /** Asked at each scrape for rategate_upstream_up (set by the composition root: the readiness probe, cached). */
  upstreamProbe: (() => Promise<boolean>) | undefined;
  readonly upstreamUp: client.Gauge = new client.Gauge({
    name: 'rategate_upstream_up',
    help: '1 while the default upstream accepts TCP connections (checked at most once a second); readiness ignores it unless readiness.upstream is true.',
    registers: [this.registry],
    aggregator: 'min',
    collect: async () => {
      if (this.upstreamProbe) this.upstreamUp.set((await this.upstreamProbe()) ? 1 : 0);
    },
  });

  readonly gateways = new client.Gauge({
    name: 'rategate_gateways',
    help: 'Gateway processes sharing the store (each --workers worker counts), learned from their heartbeats; store.gateways until the store has answered. The local fallback and the leases are sized by it.',
    registers: [this.registry],
    aggregator: 'max',
  });

  readonly storeNodeUp = new client.Gauge({
    name: 'rategate_store_node_up',
    help: 'Per Redis master (host:port; the master name for Sentinel): 1 while its calls succeed, 0 while its keys follow onError. A master replaced by its promoted replica loses its series.',
    labelNames: ['node'] as const,
    registers: [this.registry],
    aggregator: 'min',
  });

  /** Asked at each scrape for rategate_store_keys (set by the composition root). */
  storeKeysProbe: (() => number) | undefined;
  readonly storeKeys: client.Gauge = new client.Gauge({
    name: 'rategate_store_keys',
    help: "Buckets held in this process's memory: the memory store's, or the Redis store's local fallback's (bounded by store.maxKeys).",
    registers: [this.registry],
    collect: () => {
      if (this.storeKeysProbe) this.storeKeys.set(this.storeKeysProbe());
    },
  });
  readonly storeKeysRefused = new client.Counter({
    name: 'rategate_store_keys_refused_total',
    help: 'Requests refused 429 because they needed a new bucket and the memory store (or the local fallback) was full (store.maxKeys).',
    registers: [this.registry],
  });

  readonly gatewayResponses = new client.Counter({
    name: 'rategate_gateway_responses_total',
    help: 'Responses the gateway made itself (not the upstream), by status code.',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });

  readonly upstreamRefused = new client.Counter({
    name: 'rategate_upstream_refused_total',
    help: 'Requests answered without being forwarded because of the upstream pool: queue_timeout (503: no connection free within server.upstreamQueueTimeout), per_ip_cap (429: the client already held server.maxUpstreamConnectionsPerIp).',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly upstreamWaiting = new client.Gauge({
    name: 'rategate_upstream_waiting',
    help: 'Requests waiting for an upstream connection (every pool).',
    registers: [this.registry],
  });
  readonly slowBodies = new client.Counter({
    name: 'rategate_slow_bodies_total',
    help: 'Request bodies answered 408 for arriving slower than server.minBodyRate over server.minBodyRateGrace.',
    registers: [this.registry],
  });

  /** A gateway-made answer outside the pipeline (a client error on the socket, a refused upgrade), by status. */
  readonly countGatewayAnswer = (status: number): void => void this.gatewayResponses.labels(String(status)).inc();

  private readonly statusClass = STATUS_CLASSES.map((c) => this.upstreamDuration.labels(c));

  /**
   * Local rejections as plain numbers, handed to prom-client at scrape time like the rule counts: a
   * flood the blocked cache absorbs must not cost a label hash per request.
   */
  private readonly localRejections: Record<LocalRejectionSource, number> = { blocked_cache: 0, fallback: 0 };
  private readonly localRejectionsExported: Record<LocalRejectionSource, number> = { blocked_cache: 0, fallback: 0 };

  constructor(opts: { collectDefault?: boolean } = {}) {
    if (opts.collectDefault ?? true) client.collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
    // Known label values start at 0, so an alert on increase() sees the first event.
    for (const source of ['blocked_cache', 'fallback'] as const) this.storeLocalRejections.inc({ source }, 0);
    for (const reason of [...STORE_ERROR_REASONS, 'circuit_open']) this.storeErrors.inc({ reason }, 0);
    for (const reason of UPSTREAM_ERROR_REASONS) this.upstreamErrors.inc({ reason }, 0);
    for (const result of RELOAD_RESULTS) this.configReloads.inc({ result }, 0);
    for (const reason of ADMISSION_REFUSALS) this.upstreamRefused.inc({ reason }, 0);
    this.upstreamWaiting.set(0);
    this.buildInfo.set({ version: VERSION, node: process.version }, 1);
    this.storeFallbackActive.set(0);
    this.storeUp.set(1);
  }

  /** The config was loaded (at start: `reload` false) or a reload was tried: `ok` false when refused. */
  configLoaded(ok: boolean, reload = true): void {
    if (reload) this.configReloads.inc({ result: ok ? 'success' : 'error' });
    this.configLastReloadSuccessful.set(ok ? 1 : 0);
    if (ok) this.configLastReloadSuccessTimestamp.setToCurrentTime();
  }

  /** What the limiter reports, as metrics (limiter/ knows nothing of Prometheus). */
  storeObserver(): StoreObserver {
    return {
      storeError: (reason) => this.storeErrors.labels(reason).inc(),
      fallbackActive: (active) => this.storeFallbackActive.set(active ? 1 : 0),
      refundFailed: () => this.storeRefundFailures.inc(),
      localRejection: (source) => void this.localRejections[source]++,
      batchSent: (requests) => this.storeBatchRequests.observe(requests),
      nodeUp: (node, up) => this.storeNodeUp.set({ node }, up ? 1 : 0),
      nodeGone: (node) => this.storeNodeUp.remove({ node }),
      keysRefused: () => this.storeKeysRefused.inc(),
    };
  }

  /** What the upstream pools' admission reports, as metrics. */
  admissionObserver(): AdmissionObserver {
    return {
      refused: (reason) => this.upstreamRefused.labels(reason).inc(),
      waiting: (delta) => this.upstreamWaiting.inc(delta),
    };
  }

  private register<T extends FastHistogram>(metric: T): T {
    // prom-client reads a metric through name, help, type, aggregator and get(): FastHistogram has them.
    this.registry.registerMetric(metric as unknown as client.Metric);
    return metric;
  }

  forRule(name: string): RuleCounters {
    let c = this.ruleCounters.get(name);
    if (!c) {
      c = new RuleCounters();
      this.ruleCounters.set(name, c);
    }
    return c;
  }

  /** Hands the counts added since the last scrape to prom-client. */
  private flushRuleCounts(): void {
    for (const [rule, c] of this.ruleCounters) {
      const e = c.exported;
      if (c.allowed > e.allowed) this.requests.inc({ rule, decision: 'allowed' }, c.allowed - e.allowed);
      if (c.limited > e.limited) this.requests.inc({ rule, decision: 'limited' }, c.limited - e.limited);
      if (c.shadowLimited > e.shadowLimited) this.requests.inc({ rule, decision: 'shadow_limited' }, c.shadowLimited - e.shadowLimited);
      if (c.nearLimit > e.nearLimit) this.nearLimit.inc({ rule }, c.nearLimit - e.nearLimit);
      e.allowed = c.allowed;
      e.limited = c.limited;
      e.shadowLimited = c.shadowLimited;
      e.nearLimit = c.nearLimit;
    }
  }

  private flushLocalRejections(): void {
    for (const source of ['blocked_cache', 'fallback'] as const) {
      const delta = this.localRejections[source] - this.localRejectionsExported[source];
      if (delta > 0) this.storeLocalRejections.inc({ source }, delta);
      this.localRejectionsExported[source] = this.localRejections[source];
    }
  }

  observeUpstream(status: number, seconds: number): void {
    const h = this.statusClass[Math.floor(status / 100) - 1];
    if (h) h.observe(seconds);
  }
}

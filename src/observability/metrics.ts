/** @module Every Prometheus metric of the gateway, defined in one place. Labels never carry an IP, a token or an account. */
import client from 'prom-client';
import { UPSTREAM_ERROR_REASONS } from '../http/errors.js';
import { incByLabel, metricMaker } from './define-metrics.js';
import type { HistogramSeries } from './histogram.js';
import { STORE_ERROR_REASONS } from '../limiter/errors.js';
import type { LocalRejectionSource, StoreObserver } from '../limiter/types.js';
import { REVISION, VERSION } from './version.js';
import { watchEventLoop } from './event-loop.js';
import { ADMISSION_REFUSALS, type AdmissionObserver } from '../proxy/admission.js';
import { INTROSPECTION_RESULTS, type IntrospectionResult } from '../identity/account.js';
import { HELP } from './metric-help.js';
import {
  GATEWAY_5XX,
  RELOAD_RESULTS,
  REQUEST_DURATION_BOUNDS,
  RESPONSE_DECISIONS,
  STATUS_CLASSES,
  type ResponseDecision,
} from './metric-labels.js';
import { RuleCounters } from './rule-counters.js';

export {
  DECISIONS,
  RELOAD_RESULTS,
  REQUEST_DURATION_BOUNDS,
  RESPONSE_DECISIONS,
  STATUS_CLASSES,
  type Decision,
  type ResponseDecision,
} from './metric-labels.js';
export { RuleCounters } from './rule-counters.js';

/**
 * How often the event-loop delay histogram (prom-client's `nodejs_eventloop_lag_{min,max,mean,p50,p90,p99}_seconds`)
 * samples, in ms. prom-client's default is 10: a timer waking an idle gateway 100 times a second. A
 * stall that spans a sample is recorded whatever the interval; `nodejs_eventloop_lag_seconds` is
 * measured at each scrape and does not depend on it.
 */
export const EVENT_LOOP_SAMPLE_MS = 100;

export class Metrics {
  readonly registry = new client.Registry();
  private readonly make = metricMaker(this.registry, HELP);

  private readonly ruleCounters = new Map<string, RuleCounters>();

  readonly requests = this.make.counter('rategate_requests_total', {
    labelNames: ['rule', 'decision'],
    collect: () => this.flushRuleCounts(),
  });
  readonly nearLimit = this.make.counter('rategate_near_limit_total', {
    labelNames: ['rule'],
    collect: () => this.flushRuleCounts(),
  });
  /** Observed on every request: FastHistogram, not prom-client's (see histogram.ts). */
  readonly storeDuration = this.make.histogram(
    'rategate_store_duration_seconds',
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25],
  );
  readonly storeErrors = this.make.counter('rategate_store_errors_total', { labelNames: ['reason'] });
  readonly storeFallbackActive = this.make.gauge('rategate_store_fallback_active');
  readonly storeRefundFailures = this.make.counter('rategate_store_refund_failures_total');
  readonly storeLocalRejections = this.make.counter('rategate_store_local_rejections_total', {
    labelNames: ['source'],
    collect: () => this.flushLocalRejections(),
  });
  /** Observed once per script call, which at load carries many requests. */
  readonly storeBatchRequests = this.make.histogram('rategate_store_batch_requests', [1, 2, 4, 8, 16, 32, 64]);
  readonly upstreamDuration = this.make.histogram(
    'rategate_upstream_duration_seconds',
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    'status_class',
  );
  readonly upstreamErrors = this.make.counter('rategate_upstream_errors_total', { labelNames: ['reason'] });
  readonly configReloads = this.make.counter('rategate_config_reloads_total', { labelNames: ['result'] });
  // -- Operations (SPEC §6): reload state, store state and build, for alerts. In `--workers` mode the
  // primary sums series over workers; these say how to combine theirs instead.
  readonly configLastReloadSuccessful = this.make.gauge('rategate_config_last_reload_successful', {
    aggregator: 'min',
  });
  readonly configLastReloadSuccessTimestamp = this.make.gauge('rategate_config_last_reload_success_timestamp_seconds', {
    aggregator: 'min',
  });
  readonly buildInfo = this.make.gauge('rategate_build_info', {
    labelNames: ['version', 'revision', 'node'],
    aggregator: 'first',
  });
  /** Asked at each scrape for rategate_store_up (set by the composition root: a bounded, cached check). */
  storeProbe: (() => Promise<boolean>) | undefined;
  readonly storeUp: client.Gauge = this.make.gauge('rategate_store_up', {
    aggregator: 'min',
    collect: async () => {
      if (this.storeProbe) this.storeUp.set((await this.storeProbe()) ? 1 : 0);
    },
  });

  /** Asked at each scrape for rategate_upstream_up (set by the composition root: the upstream probe, proxy/upstream-probe.ts). */
  upstreamProbe: (() => Promise<boolean>) | undefined;
  readonly upstreamUp: client.Gauge = this.make.gauge('rategate_upstream_up', {
    aggregator: 'min',
    collect: async () => {
      if (this.upstreamProbe) this.upstreamUp.set((await this.upstreamProbe()) ? 1 : 0);
    },
  });

  readonly gateways = this.make.gauge('rategate_gateways', { aggregator: 'max' });

  readonly storeNodeUp = this.make.gauge('rategate_store_node_up', { labelNames: ['node'], aggregator: 'min' });

  /** Asked at each scrape for rategate_store_keys (set by the composition root). */
  storeKeysProbe: (() => number) | undefined;
  readonly storeKeys: client.Gauge = this.make.gauge('rategate_store_keys', {
    collect: () => {
      if (this.storeKeysProbe) this.storeKeys.set(this.storeKeysProbe());
    },
  });
  readonly storeMaxKeys = this.make.gauge('rategate_store_max_keys');
  readonly storeKeysRefused = this.make.counter('rategate_store_keys_refused_total');

  readonly gatewayResponses = this.make.counter('rategate_gateway_responses_total', { labelNames: ['code'] });
  readonly eventLoopDelay = this.make.histogram(
    'rategate_event_loop_delay_seconds',
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  );
  private readonly eventLoop: { stop(): void } | undefined;

  readonly upstreamRefused = this.make.counter('rategate_upstream_refused_total', { labelNames: ['reason'] });
  readonly upstreamWaiting = this.make.gauge('rategate_upstream_waiting');
  readonly slowBodies = this.make.counter('rategate_slow_bodies_total');
  readonly introspections = this.make.counter('rategate_introspections_total', { labelNames: ['result'] });
  /** One child per result, made once: a flood refused by the budget costs no label hash per request. */
  private readonly introspectionCounts = new Map(INTROSPECTION_RESULTS.map((r) => [r, this.introspections.labels(r)]));

  /** An introspection's result, or one the budget refused (`budget_exhausted`). */
  readonly introspected = (result: IntrospectionResult): void => this.introspectionCounts.get(result)!.inc();
  readonly drainCuts = this.make.counter('rategate_drain_cut_total');
  readonly tlsExpiry = this.make.gauge('rategate_tls_certificate_expiry_timestamp_seconds', {
    labelNames: ['name'],
    aggregator: 'min',
  });
  readonly tlsReloads = this.make.counter('rategate_tls_reloads_total', { labelNames: ['result'] });
  readonly proxyProtocolRefused = this.make.counter('rategate_proxy_protocol_refused_total', {
    labelNames: ['reason'],
  });
  readonly fragmentedBodies = this.make.counter('rategate_fragmented_bodies_total');
  readonly http2Closed = this.make.counter('rategate_http2_closed_total', { labelNames: ['reason'] });

  /** A gateway-made answer outside the pipeline (a client error on the socket, a refused upgrade), by status. */
  readonly countGatewayAnswer = (status: number): void => {
    this.gatewayAnswered(status);
    this.countResponse(status);
  };

  /** rategate_gateway_responses_total{code} + 1 (statuses are the gateway's own few). */
  readonly gatewayAnswered = incByLabel<number>(this.gatewayResponses);

  /** One answer to a client (status 0: none was written, the client left first). */
  countResponse(status: number): void {
    const i = Math.floor(status / 100) - 1;
    if (i >= 0 && i < 5) this.responseCounts[i]!++;
  }

  /**
   * A parsed request's answer, where it is written (pipeline/gateway.ts `finish`): its latency by code
   * class and decision, and the response count. Status 0 (the client left first) is neither.
   */
  observeResponse(status: number, decision: ResponseDecision, seconds: number): void {
    const i = Math.floor(status / 100) - 1;
    if (i < 0 || i >= 5) return;
    this.responseCounts[i]!++;
    this.durationSeries[decision]?.[i]!.observe(seconds);
  }

  private readonly statusClass = STATUS_CLASSES.map((c) => this.upstreamDuration.labels(c));

  // -- RED (issue 40): what clients see. The histogram is observed once per parsed request, the
  // responses counter once per answer of any kind; both cost an index and an add on the request path.
  readonly requestDuration = this.make.histogram('rategate_http_request_duration_seconds', REQUEST_DURATION_BOUNDS, [
    'code_class',
    'decision',
  ]);
  /** Each decision's series by code class, taken once (no label hash per request). */
  private readonly durationSeries = Object.fromEntries(
    RESPONSE_DECISIONS.map((d) => [d, STATUS_CLASSES.map((c) => this.requestDuration.labels(c, d))]),
  ) as Record<ResponseDecision, HistogramSeries[]>;
  /** Responses per code class as plain numbers, handed to prom-client at scrape time. */
  private readonly responseCounts = [0, 0, 0, 0, 0];
  private readonly responseCountsExported = [0, 0, 0, 0, 0];
  readonly responses = this.make.counter('rategate_http_responses_total', {
    labelNames: ['code_class'],
    collect: () => this.flushResponses(),
  });

  /**
   * Local rejections as plain numbers, handed to prom-client at scrape time like the rule counts: a
   * flood the blocked cache absorbs must not cost a label hash per request.
   */
  private readonly localRejections: Record<LocalRejectionSource, number> = { blocked_cache: 0, fallback: 0 };
  private readonly localRejectionsExported: Record<LocalRejectionSource, number> = { blocked_cache: 0, fallback: 0 };

  constructor(opts: { collectDefault?: boolean } = {}) {
    if (opts.collectDefault ?? true) {
      client.collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
      this.eventLoop = watchEventLoop(this.eventLoopDelay, EVENT_LOOP_SAMPLE_MS);
    }
    // Known label values start at 0, so an alert on increase() sees the first event.
    for (const source of ['blocked_cache', 'fallback'] as const) this.storeLocalRejections.inc({ source }, 0);
    for (const reason of [...STORE_ERROR_REASONS, 'circuit_open']) this.storeErrors.inc({ reason }, 0);
    for (const reason of UPSTREAM_ERROR_REASONS) this.upstreamErrors.inc({ reason }, 0);
    for (const result of RELOAD_RESULTS) this.configReloads.inc({ result }, 0);
    for (const reason of ADMISSION_REFUSALS) this.upstreamRefused.inc({ reason }, 0);
    for (const result of INTROSPECTION_RESULTS) this.introspections.inc({ result }, 0);
    for (const code of GATEWAY_5XX) this.gatewayResponses.inc({ code }, 0);
    this.upstreamWaiting.set(0);
    this.buildInfo.set({ version: VERSION, revision: REVISION, node: process.version }, 1);
    this.storeFallbackActive.set(0);
    this.storeUp.set(1);
  }

  /** Stops the event-loop watch (at shutdown: in-process tests start many gateways). */
  stop(): void {
    this.eventLoop?.stop();
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
      if (c.shadowLimited > e.shadowLimited)
        this.requests.inc({ rule, decision: 'shadow_limited' }, c.shadowLimited - e.shadowLimited);
      if (c.nearLimit > e.nearLimit) this.nearLimit.inc({ rule }, c.nearLimit - e.nearLimit);
      e.allowed = c.allowed;
      e.limited = c.limited;
      e.shadowLimited = c.shadowLimited;
      e.nearLimit = c.nearLimit;
    }
  }

  private flushResponses(): void {
    STATUS_CLASSES.forEach((code_class, i) => {
      this.responses.inc({ code_class }, this.responseCounts[i]! - this.responseCountsExported[i]!);
      this.responseCountsExported[i] = this.responseCounts[i]!;
    });
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

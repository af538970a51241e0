/** @module Every Prometheus metric of the gateway, defined in one place. Labels never carry an IP, a token or an account. */
import client from 'prom-client';
import { UPSTREAM_ERROR_REASONS } from '../http/errors.js';
import { metricMaker } from './define-metrics.js';
import type { HistogramSeries } from './histogram.js';
import { STORE_ERROR_REASONS } from '../limiter/errors.js';
import type { LocalRejectionSource, StoreObserver } from '../limiter/types.js';
import { REVISION, VERSION } from './version.js';
import { watchEventLoop } from './event-loop.js';
import { ADMISSION_REFUSALS, type AdmissionObserver } from '../proxy/admission.js';
import { INTROSPECTION_RESULTS, type IntrospectionResult } from '../identity/account.js';

/**
 * How often the event-loop delay histogram (prom-client's `nodejs_eventloop_lag_{min,max,mean,p50,p90,p99}_seconds`)
 * samples, in ms. prom-client's default is 10: a timer waking an idle gateway 100 times a second. A
 * stall that spans a sample is recorded whatever the interval; `nodejs_eventloop_lag_seconds` is
 * measured at each scrape and does not depend on it.
 */
export const EVENT_LOOP_SAMPLE_MS = 100;

/** Gateway-made 5xx answers, at 0 from the start (an alert on their rate sees the first). */
const GATEWAY_5XX = ['500', '502', '503', '504'] as const;

/** The values of rategate_requests_total's `decision` label. */
export const DECISIONS = ['allowed', 'limited', 'shadow_limited'] as const;
export type Decision = (typeof DECISIONS)[number];
/** The values of rategate_upstream_duration_seconds's `status_class` label (and of the RED metrics' `code_class`). */
export const STATUS_CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'] as const;

/** The `decision` label of rategate_http_request_duration_seconds: the pipeline's decision kinds (pipeline/decision.ts). */
export const RESPONSE_DECISIONS = [
  'allowed',
  'limited',
  'unmatched',
  'exempt',
  'rejected',
  'blocked',
  'banned',
  'store_unavailable',
] as const;
export type ResponseDecision = (typeof RESPONSE_DECISIONS)[number];

/**
 * The bounds of the end-to-end latency histogram: from a decision without I/O (well under a millisecond)
 * to the default upstream timeout's 504 (30 s, which lands in the 60 s bucket).
 */
export const REQUEST_DURATION_BOUNDS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
] as const;

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

/**
 * What each metric counts: its HELP line on /metrics and its row in docs/operations.md. The class below
 * makes each metric from its name here.
 */
const HELP = {
  rategate_requests_total: 'Requests checked against a rule, by rule and decision (allowed, limited, shadow_limited).',
  rategate_near_limit_total: 'Admitted requests that left their bucket at or below 20% of its limit.',
  rategate_store_duration_seconds: 'Time of one store decision (all buckets of a request).',
  rategate_store_errors_total: 'Store calls that failed, by reason.',
  rategate_store_fallback_active: '1 while the store is failing and its onError policy is in force.',
  rategate_store_refund_failures_total:
    'Cross-slot refunds that failed: the charge stays until the bucket window or refill passes it (under-admission, never over).',
  rategate_store_local_rejections_total:
    'Requests rejected without the shared store deciding, by source: blocked_cache (a bucket known to be limited until a time) or fallback (the local count of onError: local while the store fails).',
  rategate_store_batch_requests: 'Requests carried by one Redis script call of the batcher.',
  rategate_upstream_duration_seconds:
    'Time from forwarding a request to the upstream response headers, by status class.',
  rategate_upstream_errors_total: 'Upstream failures answered by the gateway, by reason.',
  rategate_config_reloads_total: 'Config reloads, by result (success, error).',
  rategate_config_last_reload_successful:
    '1 when the last config load or reload succeeded, 0 when it was refused (the previous table stays in force).',
  rategate_config_last_reload_success_timestamp_seconds: 'Unix time of the last successful config load or reload.',
  rategate_build_info:
    'Always 1; the labels say which rategate (its version and the git revision it was built from) and which Node.js run.',
  rategate_store_up:
    '1 while decisions come from the store: every key has a master, none is failing, each answers as a master (always 1 for memory); 0 while some decisions follow onError.',
  rategate_upstream_up:
    '1 while the default upstream answers a HEAD of upstream.healthPath within 5 s (asked at most once a second, when read); 0 when it refuses connections or answers nothing (frozen). Readiness ignores it unless readiness.upstream is true.',
  rategate_gateways:
    'Gateway processes sharing the store (each --workers worker counts), learned from their heartbeats; store.gateways until the store has answered. The local fallback and the leases are sized by it.',
  rategate_store_node_up:
    'Per Redis master (host:port; the master name for Sentinel): 1 while its calls succeed, 0 while its keys follow onError. A master replaced by its promoted replica loses its series.',
  rategate_store_keys:
    "Buckets held in this process's memory: the memory store's, or the Redis store's local fallback's (bounded by store.maxKeys).",
  rategate_store_max_keys:
    "Buckets this process's memory store (or the Redis store's local fallback) may hold: store.maxKeys, or the default derived from the memory limit at start.",
  rategate_store_keys_refused_total:
    'Requests refused 429 because they needed a new bucket and the memory store (or the local fallback) was full (store.maxKeys).',
  rategate_gateway_responses_total:
    "Responses the gateway made itself (not the upstream), by status code: its 429s, 403s and 4xx refusals, and its 5xx (500, 502/504 for an upstream that failed or did not answer, 503); the upstream's own answers are in rategate_upstream_duration_seconds.",
  rategate_event_loop_delay_seconds:
    'How late the event loop ran a timer set every 100 ms (0 when on time): requests wait as long for their next step. Sampled 10 times a second.',
  rategate_http_request_duration_seconds:
    "The gateway's own latency per request, from its arrival to its answer's head (the upstream's time included), by code class and decision; a request whose client left before its answer is not counted.",
  rategate_http_responses_total:
    'Responses to clients by code class, whoever made them (upstream or gateway), including the refusals of requests that could not be parsed (400, 408, 431) and of refused upgrades.',
  rategate_upstream_refused_total:
    'Requests answered without being forwarded because of the upstream pool: queue_timeout (503: no connection free within server.upstreamQueueTimeout), per_ip_cap (429: the client already held server.maxUpstreamConnectionsPerIp).',
  rategate_upstream_waiting: 'Requests waiting for an upstream connection (every pool).',
  rategate_slow_bodies_total:
    'Request bodies answered 408 for arriving slower than server.minBodyRate over server.minBodyRateGrace.',
  rategate_introspections_total:
    'Token introspections (clients.account.from: introspect), by result: ok, invalid (401, 422, other 4xx but 403), forbidden (403), error (5xx, network, deadline), budget_exhausted (answered 429 without a call: clients.account.introspection.budget).',
  rategate_proxy_protocol_refused_total:
    'Connections from a server.proxyProtocol peer closed for want of a valid PROXY header: invalid (missing or malformed), timeout (none within server.headersTimeout).',
  rategate_tls_certificate_expiry_timestamp_seconds:
    'When the certificate the TLS listener serves expires (notAfter, epoch seconds), by its first DNS name.',
  rategate_tls_reloads_total:
    'Certificate pairs read again after a change on disk: success (served to new connections), error (the pair in force stays; the log says why).',
  rategate_drain_cut_total:
    'Requests still in flight when the shutdown drain (server.drainGrace) ended, cut by the gateway (logged with error DRAIN_TIMEOUT).',
  rategate_fragmented_bodies_total:
    'Connections closed for a request body in too many small chunks: beyond its first 1024 chunks, a body must average 64 bytes a chunk.',
  rategate_http2_closed_total:
    'HTTP/2 connections closed with GOAWAY by a bound of the gateway: rapid_reset (streams reset faster than 50 a second past a burst of 200; CVE-2023-44487), control_flood (SETTINGS and PING frames faster than 20 a second past a burst of 500). A body in too many small DATA frames is counted in rategate_fragmented_bodies_total, as on HTTP/1.1. Floods node:http2 itself closes (CONTINUATION, invalid frames, refused streams) are not counted here.',
} as const;

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
    this.gatewayResponses.labels(String(status)).inc();
    this.countResponse(status);
  };

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

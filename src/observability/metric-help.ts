/** @module What each gateway metric counts: its HELP line on /metrics and its row in docs/operations.md. */

/**
 * What each metric counts: its HELP line on /metrics and its row in docs/operations.md. The Metrics class
 * (metrics.ts) makes each metric from its name here.
 */
export const HELP = {
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
    'Gateway processes sharing the store (each --workers worker counts), learned from their heartbeats; store.gateways until the store has answered, and at least that for one heartbeat period after joining. The local fallback and the leases are sized by it.',
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

/**
 * @module The gateway's metrics' known label values and histogram bounds: the series that exist at 0
 * from the start, and the decision and status-class labels the request path indexes by.
 */

/** Gateway-made 5xx answers, at 0 from the start (an alert on their rate sees the first). */
export const GATEWAY_5XX = ['500', '502', '503', '504'] as const;

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

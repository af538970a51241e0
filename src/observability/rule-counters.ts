/** @module A rule's decision counts as plain numbers, handed to prom-client at scrape time (metrics.ts). */

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

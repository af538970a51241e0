/** @module What the stages read besides the request: the store, the metrics, the clock, the guard, the drain. */
import type { Guard } from '../guard/guard.js';
import type { Store } from '../limiter/types.js';
import type { Metrics } from '../observability/metrics.js';

/** What the limit decision needs besides the request: the store, the metrics, and the store's clock. */
export interface DecideContext {
  readonly store: Store;
  readonly metrics: Metrics;
  /** Epoch ms; the store's clock as near as the gateway knows it (for an early refusal's headers). */
  readonly now: () => number;
  /** Runtime exemptions (the admin API's), beside `exempt.ips`. */
  readonly runtimeExempt?: ((address: string) => boolean) | undefined;
  /** Told the rule and bucket key of each request limited (the triage sketch). */
  readonly onLimited?: ((rule: string, bucketKey: string) => void) | undefined;
}

export interface ScreenContext extends DecideContext {
  /** Runtime blocks, exemptions, bans and in-flight slots (absent: none of them). */
  readonly guard?: Guard | undefined;
  /** The listener's drain: once draining, new requests are answered 503. */
  readonly drain?: { readonly draining: boolean } | undefined;
}

/** @module What a Gateway (gateway.ts) is built with: the policy, the store, the upstreams and the observers. */
import type { Store } from '../limiter/types.js';
import type { Metrics } from '../observability/metrics.js';
import type { Forwarder } from '../proxy/forward.js';
import type { Tunnel } from '../proxy/tunnel.js';
import type { UpstreamRoutes } from '../proxy/routes.js';
import type { BodyRateWatch } from '../http/body-rate.js';
import type { RequestPolicy } from './policy.js';
import type { Guard } from '../guard/guard.js';
import type { RequestRecord } from './access-record.js';
import type { Stage } from './drive.js';
import type { RequestTracing } from '../observability/tracing.js';

export interface GatewayOptions {
  policy: () => RequestPolicy;
  store: Store;
  forwarder: Forwarder;
  tunnel: Tunnel;
  /** `routes:` to named upstreams; null or absent: everything goes to `forwarder` / `tunnel`. */
  routes?: UpstreamRoutes | null;
  metrics: Metrics;
  /** The store's clock (epoch ms), as near as the gateway knows it. */
  now: () => number;
  /** Called once per request when its answer has been decided (the access log). */
  onRequest?: (record: RequestRecord) => void;
  /** Whether onRequest wants records now: when not, none is built (the access log level may be off). */
  wantsRecords?: () => boolean;
  /** Runtime blocks, exemptions, bans and in-flight slots (absent: none of them). */
  guard?: Guard;
  runtimeExempt?: (address: string) => boolean;
  onLimited?: (rule: string, bucketKey: string) => void;
  /**
   * The listener's drain (http/drain.ts): `draining`, the one flag that says new requests are answered
   * 503; `cut`, that the grace period ran out and the gateway itself is closing what is left.
   */
  drain?: { readonly draining: boolean; readonly cut?: boolean };
  /** `server.minBodyRate`: every request body is watched until it has arrived (absent: none is). */
  bodyRate?: BodyRateWatch;
  /** OpenTelemetry traces (observability/tracing.ts); absent: off, no span is made. */
  tracing?: RequestTracing;
  /** The stages a request goes through (absent: screen.ts STAGES): the list to wrap for a span or a timer per stage. */
  stages?: readonly Stage[];
}

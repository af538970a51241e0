/** @module Joins the fleet when the store is shared (a Redis-protocol backend): the live count to the store and the gauge, the triage sketch and the request rates to the store. */
import type { TopLimited } from '../guard/top-keys.js';
import type { StoreHandle, StoreSettings } from '../limiter/factory.js';
import type { Metrics } from '../observability/metrics.js';
import { Fleet } from './fleet.js';
import { encodeSketch } from './sketch.js';

export function joinFleet(o: {
  readonly store: StoreSettings;
  readonly handle: StoreHandle;
  readonly metrics: Metrics;
  readonly top: TopLimited;
  /** This replica's request rates as published (fleet/rates.ts), read at each heartbeat. */
  readonly rates?: () => string | undefined;
  readonly heartbeatMs?: number;
}): Fleet | undefined {
  // The fleet's heartbeat lives in the store: a backend that does not speak the Redis protocol has none.
  if (!o.handle.can.redisProtocol) {
    o.metrics.gateways.set(1);
    return undefined;
  }
  return new Fleet({
    url: o.store.url,
    prefix: o.store.prefix,
    timeoutMs: o.store.timeout,
    sentinelPassword: o.store.sentinelPassword,
    floor: o.store.gateways ?? 2,
    onCount: (n) => {
      o.handle.setGateways?.(n);
      o.metrics.gateways.set(n);
    },
    sketch: () => encodeSketch(o.top),
    ...(o.rates !== undefined ? { rates: o.rates } : {}),
    ...(o.heartbeatMs !== undefined ? { heartbeatMs: o.heartbeatMs } : {}),
  });
}

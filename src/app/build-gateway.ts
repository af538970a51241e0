/** @module The request pipeline built at start, wired to the access log, the guard, the triage sketch and the body-rate watch. */
import type { Logger } from 'pino';
import type { StoreHandle } from '../limiter/factory.js';
import { createAccessLog } from '../observability/log.js';
import type { Metrics } from '../observability/metrics.js';
import type { Forwarder } from '../proxy/forward.js';
import { Tunnel } from '../proxy/tunnel.js';
import type { UpstreamRoutes } from '../proxy/routes.js';
import { BodyRateWatch } from '../http/body-rate.js';
import { Gateway } from '../pipeline/gateway.js';
import type { RequestPolicy } from '../pipeline/policy.js';
import type { Guard } from '../guard/index.js';
import type { GatewaySettings } from './settings.js';

/** The pipeline, wired to the access log, the guard and the triage sketch. */
export function buildGateway(o: {
  policy: () => RequestPolicy;
  storeHandle: StoreHandle;
  upstream: { readonly forwarder: Forwarder };
  origin: string;
  routes: UpstreamRoutes | null;
  metrics: Metrics;
  log: Logger;
  guard: Guard;
  settings: Pick<GatewaySettings, 'now' | 'tracing'>;
  drain: { readonly draining: boolean };
}): Gateway {
  const requestLogLevel = () => o.policy().snapshot.config.log.requests;
  const accessLog = createAccessLog(o.log);
  return new Gateway({
    policy: o.policy,
    store: o.storeHandle.store,
    forwarder: o.upstream.forwarder,
    tunnel: new Tunnel(o.origin),
    routes: o.routes,
    metrics: o.metrics,
    now: o.settings.now ?? Date.now,
    onRequest: (r) => accessLog(requestLogLevel(), r),
    wantsRecords: () => o.log.isLevelEnabled(requestLogLevel()),
    guard: o.guard,
    runtimeExempt: (address) => o.guard.runtimeExempts()?.contains(address) === true,
    onLimited: (rule, key) => {
      o.guard.top.add(rule, key);
      o.guard.limitedComposites.note(key);
    },
    drain: o.drain,
    ...(o.settings.tracing !== undefined ? { tracing: o.settings.tracing } : {}),
    bodyRate: new BodyRateWatch(
      () => o.policy().snapshot.config.server,
      () => o.metrics.slowBodies.inc(),
    ),
  });
}

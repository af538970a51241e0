/** @module The clients of the default upstream built at start: the proxy's pool and introspection's own. */
import type { Config } from '../config/index.js';
import { countedIntrospect, createHttpIntrospector, createIntrospectionPool } from '../identity/index.js';
import type { Introspect } from '../identity/account.js';
import type { Metrics } from '../observability/metrics.js';
import { Forwarder } from '../proxy/forward.js';
import type { PoolAdmission } from '../proxy/routes.js';

/** The default upstream's proxy pool, and introspection on a pool of its own. `admission`: every proxy pool's (the server's live limits). */
export function upstreamClients(
  cfg: Config,
  origin: string,
  admission: PoolAdmission,
  metrics: Metrics,
): {
  forwarder: Forwarder;
  introspectionPool: ReturnType<typeof createIntrospectionPool>;
  introspect: Introspect;
  admission: PoolAdmission;
} {
  const forwarder = new Forwarder({
    origin,
    timeoutMs: cfg.upstream.timeout,
    connectTimeoutMs: cfg.upstream.connectTimeout,
    clientHost: cfg.upstream.host === 'client',
    ...admission,
  });
  // Introspection delays the request it serves: bound it well below the upstream timeout. Its pool is
  // its own, so nothing introspection does can hold the proxy's connections (issue 18).
  const introspectTimeoutMs = Math.min(cfg.upstream.timeout, 5_000);
  const introspectionPool = createIntrospectionPool(origin, {
    connections: cfg.clients.account.connections,
    timeoutMs: introspectTimeoutMs,
    connectTimeoutMs: cfg.upstream.connectTimeout,
  });
  const asked = createHttpIntrospector({
    dispatcher: introspectionPool,
    origin,
    path: cfg.clients.account.path,
    timeoutMs: introspectTimeoutMs,
  });
  const introspect = countedIntrospect(asked, metrics.introspected);
  return { forwarder, introspectionPool, introspect, admission };
}

/** @module The gateway's shutdown, in order: stop reading the config, drain the listeners, close the admin listener, the pools, the fleet, the stores. */
import type http from 'node:http';
import type { StoreHandle } from '../limiter/factory.js';
import type { createProcessLogger } from '../observability/log.js';
import type { Metrics } from '../observability/metrics.js';
import type { UpstreamRoutes } from '../proxy/routes.js';
import type { createAdminServer } from '../admin/server.js';
import type { createStatusSources } from '../admin/status-data.js';
import type { createDrain } from '../http/drain.js';
import type { H2Edge } from '../http/h2.js';
import type { startUpstream } from '../mastodon/index.js';
import type { Guard } from '../guard/index.js';
import type { Fleet } from '../fleet/fleet.js';
import type { watchConfig } from './reload.js';
import type { buildGateway } from './build-gateway.js';
import type { upstreamClients } from './upstream-clients.js';

export interface GatewayParts {
  config: ReturnType<typeof watchConfig>;
  status: ReturnType<typeof createStatusSources>;
  log: ReturnType<typeof createProcessLogger>;
  gateway: ReturnType<typeof buildGateway>;
  drain: ReturnType<typeof createDrain>;
  server: http.Server;
  h2: H2Edge | undefined;
  runAdmin: boolean;
  admin: ReturnType<typeof createAdminServer>;
  upstream: ReturnType<typeof upstreamClients>;
  routes: ReturnType<typeof UpstreamRoutes.build>;
  storeHandle: StoreHandle;
  guard: Guard;
  fleet: Fleet | undefined;
  metrics: Metrics;
  builtin: Awaited<ReturnType<typeof startUpstream>> | undefined;
}

/** Stops accepting, lets in-flight requests finish for up to `graceMs`, then closes everything. */
export async function shutdownGateway(parts: GatewayParts, graceMs: number): Promise<void> {
  const {
    config,
    status,
    log,
    gateway,
    drain,
    server,
    h2,
    runAdmin,
    admin,
    upstream,
    routes,
    storeHandle,
    guard,
    fleet,
    builtin,
    metrics,
  } = parts;
  config.stop();
  status.stop();
  metrics.stop();
  log.info({ graceMs }, 'draining: no new connections, finishing in-flight requests');
  log.flush();
  // WebSockets have no natural end: they get the drain time, then are closed.
  const wsTimer = setTimeout(() => gateway.closeTunnels(), graceMs);
  // Sets the drain's flag at once: from here new requests are answered 503 and readiness fails.
  await drain.run(server, graceMs, () => log.warn('drain time over: closing remaining connections'), h2);
  clearTimeout(wsTimer);
  gateway.closeTunnels();
  if (runAdmin) {
    await new Promise<void>((resolve) => {
      admin.close(() => resolve());
      admin.closeAllConnections();
    });
  }
  await upstream.forwarder.close();
  await routes?.close();
  await upstream.introspectionPool.close();
  await fleet?.close(); // leaves the fleet: the others' shares grow at their next heartbeat
  await storeHandle.store.close();
  await guard.close();
  await builtin?.close();
  log.info('stopped');
  log.flush();
}

/**
 * @module Composition root: builds the gateway from process settings and the limit table, and owns the
 * order of start-up and shutdown.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino, type Logger } from 'pino';
import { loadConfigFile, parseHostPort, type ConfigOverrides, type Snapshot } from './config/index.js';
import { createHttpIntrospector } from './identity/index.js';
import { createStoreFor, type StoreHandle } from './limiter/factory.js';
import { MemoryStore } from './limiter/memory.js';
import { Metrics } from './metrics.js';
import { Forwarder } from './proxy/forward.js';
import { createAdminServer } from './admin/server.js';
import { Gateway } from './server/gateway.js';
import { respondError } from './server/gateway.js';
import { buildRequestPolicy, type RequestPolicy } from './server/policy.js';
import { startUpstream, type RunningUpstream } from './upstream/index.js';

export interface GatewaySettings {
  /** Path of limits.yaml. */
  configPath: string;
  /** Flags and environment, which win over the file. */
  overrides?: ConfigOverrides;
  logger?: Logger;
  /** Tests only: the memory store's clock. */
  now?: () => number;
  /** Default Prometheus process metrics (off in tests that start many gateways in one process). */
  defaultMetrics?: boolean;
}

export interface RunningGateway {
  /** `http://host:port` of the proxy listener. */
  readonly url: string;
  readonly adminUrl: string;
  readonly upstreamUrl: string;
  readonly store: StoreHandle;
  readonly metrics: Metrics;
  snapshot(): Snapshot;
  /** Stops accepting, lets in-flight requests finish for up to `graceMs`, then closes everything. */
  shutdown(graceMs?: number): Promise<void>;
}

export async function startGateway(settings: GatewaySettings): Promise<RunningGateway> {
  const log = settings.logger ?? pino({ level: 'info' });
  const snapshot = await loadConfigFile(settings.configPath, settings.overrides);
  const cfg = snapshot.config;

  let builtin: RunningUpstream | undefined;
  let origin = cfg.upstream.url;
  if (origin === 'builtin') {
    builtin = await startUpstream({ host: '127.0.0.1', port: 0 });
    origin = builtin.url;
  }
  origin = new URL(origin).origin;

  const metrics = new Metrics({ collectDefault: settings.defaultMetrics ?? true });
  const storeHandle =
    settings.now !== undefined && cfg.store.url === 'memory'
      ? { store: new MemoryStore({ now: settings.now }), kind: 'memory' as const, ready: async () => true }
      : await createStoreFor(cfg.store);
  const forwarder = new Forwarder(
    { origin, timeoutMs: cfg.upstream.timeout, connectTimeoutMs: cfg.upstream.connectTimeout },
    respondError,
  );
  const introspect = createHttpIntrospector({
    dispatcher: forwarder.pool,
    origin,
    path: cfg.clients.account.path,
    // Introspection delays the request it serves: bound it well below the upstream timeout.
    timeoutMs: Math.min(cfg.upstream.timeout, 5_000),
  });

  const policy: RequestPolicy = buildRequestPolicy(snapshot, introspect);
  const gateway = new Gateway({
    policy: () => policy,
    store: storeHandle.store,
    forwarder,
    metrics,
    onRequest: (r) => log.debug(r, 'request'),
  });

  const server = http.createServer({ keepAliveTimeout: 65_000 }, gateway.handle);
  const listen = parseHostPort(cfg.listen)!;
  await listenOn(server, listen.host, listen.port);

  let draining = false;
  const admin = createAdminServer({
    metrics,
    ready: async () => !draining && (await storeHandle.ready()),
  });
  const adminListen = parseHostPort(cfg.admin.listen)!;
  await listenOn(admin, adminListen.host, adminListen.port);

  const url = urlOf(server);
  const adminUrl = urlOf(admin);
  log.info(
    { listen: url, admin: adminUrl, store: storeHandle.kind, upstream: cfg.upstream.url === 'builtin' ? `builtin (${origin})` : origin, rules: snapshot.rules.length },
    `rategate listening on ${url}, admin on ${adminUrl}, store ${storeHandle.kind}, upstream ${cfg.upstream.url === 'builtin' ? `builtin at ${origin}` : origin}, ${snapshot.rules.length} rules from ${snapshot.source}`,
  );

  return {
    url,
    adminUrl,
    upstreamUrl: origin,
    store: storeHandle,
    metrics,
    snapshot: () => policy.snapshot,
    async shutdown(graceMs = 10_000) {
      draining = true;
      gateway.startDraining();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const timer = setTimeout(() => server.closeAllConnections(), graceMs);
      await closed;
      clearTimeout(timer);
      await new Promise<void>((resolve) => {
        admin.close(() => resolve());
        admin.closeAllConnections();
      });
      await forwarder.close();
      await storeHandle.store.close();
      await builtin?.close();
    },
  };
}

function listenOn(server: http.Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

function urlOf(server: http.Server): string {
  const a = server.address() as AddressInfo;
  const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
  return `http://${host}:${a.port}`;
}

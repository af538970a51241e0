/**
 * @module Composition root: builds the gateway from process settings and the limit table, and owns the
 * order of start-up, reload and shutdown.
 */
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { readFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import { ConfigError, parseConfig, parseHostPort, type ConfigOverrides, type Snapshot } from './config/index.js';
import { configChanges } from './config/changes.js';
import { ConfigWatcher } from './config/watch.js';
import { createHttpIntrospector, createIntrospectionPool } from './identity/index.js';
import { createStoreFor, type StoreHandle } from './limiter/factory.js';
import { createAccessLog, createProcessLogger } from './log.js';
import { Metrics } from './metrics.js';
import { Forwarder } from './proxy/forward.js';
import { Tunnel } from './proxy/tunnel.js';
import { UpstreamRoutes } from './proxy/routes.js';
import { createAdminServer } from './admin/server.js';
import { isLoopbackListen, loadAdminToken } from './admin/token.js';
import { createDrain } from './server/drain.js';
import { Gateway } from './server/gateway.js';
import { isWebSocketUpgrade, serveAsPlainRequest } from './server/plain-upgrade.js';
import { ERROR_BODIES, GATEWAY_ERRORS, respondOnSocket, type GatewayErrorCode } from './errors.js';
import { buildRequestPolicy, type RequestPolicy } from './server/policy.js';
import { startUpstream, type RunningUpstream } from './upstream/index.js';
import { createGuard, type Guard } from './guard/index.js';
import { displayKey } from './guard/top-keys.js';

export interface GatewaySettings {
  /** Path of limits.yaml. */
  configPath: string;
  /** Flags and environment, which win over the file. */
  overrides?: ConfigOverrides;
  /**
   * Default: pino JSON lines on stdout, buffered (log.ts). Its level is set here, at start and on every
   * reload alike, to the config's `log.level` (which `overrides.logLevel`, RATEGATE_LOG_LEVEL, replaces).
   */
  logger?: Logger;
  /** Tests only: the store's clock (the memory store's, or the Redis scripts' clock override). */
  now?: () => number;
  /** Default Prometheus process metrics (off in tests that start many gateways in one process). */
  defaultMetrics?: boolean;
  /** Watch the config file and reload on change and SIGHUP (default true). */
  watch?: boolean;
  /** Run the admin listener (default true; a cluster worker leaves it to the primary). */
  admin?: boolean;
}

export interface RunningGateway {
  /** `http://host:port` of the proxy listener. */
  readonly url: string;
  readonly adminUrl: string;
  readonly upstreamUrl: string;
  readonly store: StoreHandle;
  readonly metrics: Metrics;
  readonly server: http.Server;
  /** Runtime blocks, exemptions, bans, in-flight slots and the triage sketch. */
  readonly guard: Guard;
  snapshot(): Snapshot;
  /** Re-reads the config file now; resolves true when the new table is in force. */
  reload(): Promise<boolean>;
  /** Stops accepting, lets in-flight requests finish for up to `graceMs`, then closes everything. */
  shutdown(graceMs?: number): Promise<void>;
}

export async function startGateway(settings: GatewaySettings): Promise<RunningGateway> {
  const overrides = settings.overrides ?? {};
  const initialText = await readFile(settings.configPath, 'utf8');
  const snapshot = parseConfig(initialText, settings.configPath, overrides);
  const cfg = snapshot.config;
  const log = settings.logger ?? createProcessLogger();
  log.level = cfg.log.level;

  let builtin: RunningUpstream | undefined;
  let origin = cfg.upstream.url;
  if (origin === 'builtin') {
    builtin = await startUpstream({ host: '127.0.0.1', port: 0 });
    origin = builtin.url;
  }
  origin = new URL(origin).origin;

  const metrics = new Metrics({ collectDefault: settings.defaultMetrics ?? true });
  metrics.configLoaded(true, false);
  const storeHandle = await createStoreFor(cfg.store, { observer: metrics.storeObserver(), log, ...(settings.now ? { now: settings.now } : {}) });
  const forwarder = new Forwarder({ origin, timeoutMs: cfg.upstream.timeout, connectTimeoutMs: cfg.upstream.connectTimeout });
  // Introspection delays the request it serves: bound it well below the upstream timeout. Its pool is
  // its own, so nothing introspection does can hold the proxy's connections (issue 18).
  const introspectTimeoutMs = Math.min(cfg.upstream.timeout, 5_000);
  const introspectionPool = createIntrospectionPool(origin, {
    connections: cfg.clients.account.connections,
    timeoutMs: introspectTimeoutMs,
    connectTimeoutMs: cfg.upstream.connectTimeout,
  });
  const introspect = createHttpIntrospector({ dispatcher: introspectionPool, origin, path: cfg.clients.account.path, timeoutMs: introspectTimeoutMs });

  // Named upstreams and the routes to them: built once, like the default pool (restart-only settings).
  const routes = UpstreamRoutes.build(cfg);
  let policy: RequestPolicy = buildRequestPolicy(snapshot, introspect);
  const guard = await createGuard({ store: cfg.store, registry: metrics.registry, log, config: () => policy.snapshot.config });
  const requestLogLevel = () => policy.snapshot.config.log.requests;
  const accessLog = createAccessLog(log);
  const gateway = new Gateway({
    policy: () => policy,
    store: storeHandle.store,
    forwarder,
    tunnel: new Tunnel(origin),
    routes,
    metrics,
    now: settings.now ?? Date.now,
    onRequest: (r) => accessLog(requestLogLevel(), r),
    wantsRecords: () => log.isLevelEnabled(requestLogLevel()),
    guard,
    runtimeExempt: (address) => guard.runtimeExempts()?.contains(address) === true,
    onLimited: (rule, key) => guard.top.add(rule, displayKey(key)),
  });

  const drain = createDrain();
  const server = createProxyServer(cfg.server, gateway.handle, metrics, drain.ServerResponse);
  server.on('checkContinue', gateway.handle);
  // WebSocket is tunnelled; any other upgrade is served as the HTTP/1.1 request it also is.
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) =>
    isWebSocketUpgrade(req) ? gateway.handleUpgrade(req, socket, head) : serveAsPlainRequest(server, req, socket, head),
  );
  const listen = parseHostPort(cfg.listen)!;
  await listenOn(server, listen.host, listen.port);

  let draining = false;
  const upstreamProbe = cachedProbe(origin);
  const runAdmin = settings.admin ?? true;
  // Read at start and on every reload; a cluster worker has no admin listener and needs no token.
  let adminToken = runAdmin ? await loadAdminToken(cfg.admin, settings.configPath) : null;
  const adminLoopbackOnly = isLoopbackListen(cfg.admin.listen);
  const storeProbe = cached(() => storeHandle.reachable());
  metrics.storeProbe = storeProbe;
  const admin = createAdminServer({
    token: () => adminToken,
    loopbackOnly: adminLoopbackOnly,
    metrics,
    policy: () => policy,
    store: storeHandle.store,
    guard,
    ready: async () => {
      // Readiness means "can serve": a store that does not answer leaves the gateway serving under its
      // onError policy (and every route no rule matches), so it fails readiness only when asked to.
      const reachable = await storeProbe();
      const storeCfg = policy.snapshot.config.store;
      const checks: Record<string, boolean> = { config: true, serving: !draining, upstream: await upstreamProbe() };
      if (storeCfg.failReadiness) checks.store = reachable;
      const store = { kind: storeHandle.kind, reachable, fallbackActive: storeHandle.fallbackActive(), onError: storeCfg.onError };
      return { ready: Object.values(checks).every(Boolean), checks, details: { store } };
    },
  });
  if (runAdmin) {
    const adminListen = parseHostPort(cfg.admin.listen)!;
    await listenOn(admin, adminListen.host, adminListen.port);
    if (adminToken === null && !adminLoopbackOnly) {
      log.warn(
        { admin: cfg.admin.listen },
        `the admin listener ${cfg.admin.listen} is not loopback-only and no admin token is set: /admin/buckets is refused (403) until admin.token, RATEGATE_ADMIN_TOKEN or admin.tokenFile is set; /metrics, /healthz and /readyz stay open`,
      );
    }
  }

  /** Applies a new file text: valid → swapped in whole for new requests; invalid → logged, counted, old kept. */
  async function apply(text: string): Promise<boolean> {
    let next: Snapshot;
    let nextToken: string | null;
    try {
      next = parseConfig(text, settings.configPath, overrides);
      nextToken = runAdmin ? await loadAdminToken(next.config.admin, settings.configPath) : null;
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      metrics.configLoaded(false);
      log.error({ errors: err.errors, source: settings.configPath }, 'config reload refused; the previous limit table stays in force');
      return false;
    }
    const changes = configChanges(policy.snapshot.config, next.config);
    policy = buildRequestPolicy(next, introspect, policy);
    adminToken = nextToken;
    log.level = next.config.log.level;
    metrics.configLoaded(true);
    // Say exactly what happened: key names only (never values: admin.token is one of them).
    const applied =
      changes.live.length > 0 ? `; in force now: ${changes.live.join(', ')}` : changes.atRestart.length > 0 ? '; nothing in force changed' : '; nothing changed';
    log.info({ rules: next.rules.length, source: settings.configPath, applied: changes.live }, `config reloaded: ${next.rules.length} rules${applied}`);
    if (changes.atRestart.length > 0) {
      log.warn(
        { atRestart: changes.atRestart },
        `config reloaded, but these changes apply only at the next restart (the running values stay until then): ${changes.atRestart.join(', ')}`,
      );
    }
    return true;
  }

  let lastApplied = true;
  const watcher = new ConfigWatcher({
    path: settings.configPath,
    onChange: async (text) => {
      lastApplied = await apply(text);
    },
    onError: (err) => log.warn({ err: err.message }, 'config watch error'),
  });
  if (settings.watch ?? true) watcher.start(initialText);

  const url = urlOf(server);
  const adminUrl = runAdmin ? urlOf(admin) : '';
  const upstreamText = cfg.upstream.url === 'builtin' ? `builtin at ${origin}` : origin;
  log.info(
    { listen: url, admin: adminUrl, store: storeHandle.kind, upstream: upstreamText, rules: snapshot.rules.length },
    `rategate listening on ${url}, admin ${runAdmin ? `on ${adminUrl}` : 'in the primary'}, store ${storeHandle.kind}, upstream ${upstreamText}, ${snapshot.rules.length} rules from ${settings.configPath}`,
  );
  log.flush();

  return {
    url,
    adminUrl,
    upstreamUrl: origin,
    store: storeHandle,
    metrics,
    server,
    guard,
    snapshot: () => policy.snapshot,
    async reload() {
      await watcher.reloadNow();
      return lastApplied;
    },
    async shutdown(graceMs = 10_000) {
      draining = true;
      watcher.stop();
      gateway.startDraining();
      log.info({ graceMs }, 'draining: no new connections, finishing in-flight requests');
      log.flush();
      // WebSockets have no natural end: they get the drain time, then are closed.
      const wsTimer = setTimeout(() => gateway.closeTunnels(), graceMs);
      await drain.run(server, graceMs, () => log.warn('drain time over: closing remaining connections'));
      clearTimeout(wsTimer);
      gateway.closeTunnels();
      if (runAdmin) {
        await new Promise<void>((resolve) => {
          admin.close(() => resolve());
          admin.closeAllConnections();
        });
      }
      await forwarder.close();
      await routes?.close();
      await introspectionPool.close();
      await storeHandle.store.close();
      await guard.close();
      await builtin?.close();
      log.info('stopped');
      log.flush();
    },
  };
}

/**
 * The proxy listener, hardened against hostile clients: bounded head size (431), time to send the head
 * (slowloris) and the whole request (408), a connection cap, and garbage on the socket answered 400 and
 * closed. None of these costs other clients anything.
 */
function createProxyServer(
  s: Snapshot['config']['server'],
  handler: http.RequestListener,
  metrics: Metrics,
  ServerResponse: typeof http.ServerResponse,
): http.Server {
  const server = http.createServer(
    {
      ServerResponse,
      maxHeaderSize: s.maxHeaderSize,
      headersTimeout: s.headersTimeout,
      requestTimeout: s.requestTimeout,
      keepAliveTimeout: s.keepAliveTimeout,
      // Timeouts are enforced by a periodic sweep; the default 30 s would let slowloris hold sockets long.
      connectionsCheckingInterval: Math.min(1000, s.headersTimeout),
    },
    handler,
  );
  server.maxConnections = s.maxConnections;
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    const code: GatewayErrorCode =
      err.code === 'HPE_HEADER_OVERFLOW' ? 'HEADERS_TOO_LARGE' : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'REQUEST_TIMEOUT' : 'BAD_REQUEST';
    metrics.gatewayResponses.labels(String(GATEWAY_ERRORS[code].status)).inc();
    if (err.code === 'ECONNRESET') socket.destroy();
    else respondOnSocket(socket, GATEWAY_ERRORS[code].status, ERROR_BODIES[code], []);
  });
  return server;
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

/** Is the upstream accepting TCP connections? Checked at most once a second, whatever the probe rate. */
function cachedProbe(origin: string): () => Promise<boolean> {
  const u = new URL(origin);
  const port = Number(u.port || (u.protocol === 'https:' ? 443 : 80));
  const host = u.hostname.replace(/^\[|\]$/g, '');
  return cached(
    () =>
      new Promise<boolean>((resolve) => {
        const s = net.connect({ host, port, timeout: 1000 });
        s.once('connect', () => (s.destroy(), resolve(true)));
        s.once('error', () => resolve(false));
        s.once('timeout', () => (s.destroy(), resolve(false)));
      }),
  );
}

/** A probe asked at most once a second, whatever the rate of probes and scrapes. */
function cached(probe: () => Promise<boolean>): () => Promise<boolean> {
  let last = 0;
  let value = true;
  return async () => {
    if (Date.now() - last < 1000) return value;
    last = Date.now();
    value = await probe();
    return value;
  };
}

/**
 * @module Composition root: builds the gateway from process settings and the limit table, and owns the
 * order of start-up and shutdown (reload: reload.ts; readiness: readiness.ts; the listener: http/listener.ts).
 */
import type http from 'node:http';
import type https from 'node:https';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import {
  parseConfig,
  parseHostPort,
  readConfigText,
  type Config,
  type ConfigOverrides,
  type Snapshot,
} from '../config/index.js';
import { loadSentinelPassword } from '../config/secret-file.js';
import { countedIntrospect, createHttpIntrospector, createIntrospectionPool } from '../identity/index.js';
import { createStoreFor, type StoreHandle } from '../limiter/factory.js';
import { createAccessLog, createProcessLogger, startupLog } from '../observability/log.js';
import { Metrics } from '../observability/metrics.js';
import { Forwarder } from '../proxy/forward.js';
import { Tunnel } from '../proxy/tunnel.js';
import { UpstreamRoutes, type PoolAdmission } from '../proxy/routes.js';
import { BodyRateWatch } from '../http/body-rate.js';
import { createAdminServer } from '../admin/server.js';
import { listenerFacts, loadAdminCredentials } from '../admin/token.js';
import { createStatusSources } from '../admin/status-data.js';
import { createDrain } from '../http/drain.js';
import { Gateway } from '../pipeline/gateway.js';
import { isWebSocketUpgrade, serveAsPlainRequest } from '../pipeline/plain-upgrade.js';
import { createProxyServer, listenOn, urlOf, type ParserRefusal } from '../http/listener.js';
import { createH2Edge, type H2Edge } from '../http/h2.js';
import { serveH2OnAlpn, sniffH2Preface } from '../http/h2-handoff.js';
import { RefusalLog } from '../observability/refusal-log.js';
import { requireProxyHeader } from '../http/proxy-protocol.js';
import {
  loadCertificatePair,
  secureOptions,
  watchCertificatePair,
  type CertificatePair,
  type TlsSettings,
} from '../http/tls.js';
import { ConfigError } from '../config/errors.js';
import { compileCidrs } from '../identity/cidr.js';
import { effectiveMaxKeys } from '../limiter/memory/key-bound.js';
import { buildRequestPolicy, type RequestPolicy } from '../pipeline/policy.js';
import type { Introspect } from '../identity/account.js';
import { createReadiness } from './readiness.js';
import { UpstreamProbe } from '../proxy/upstream-probe.js';
import { watchConfig } from './reload.js';
import { startUpstream } from '../mastodon/index.js';
import { createGuard, type Guard } from '../guard/index.js';
import { Surges } from '../surge/surges.js';
import type { Fleet } from '../fleet/fleet.js';
import { joinFleet } from '../fleet/join.js';
import { displayKey } from '../keys/index.js';
import type { RequestTracing } from '../observability/tracing.js';

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
  /** OpenTelemetry traces (started by `serve` as the OTEL_* variables ask, and shut down by it); absent: none. */
  tracing?: RequestTracing | undefined;
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

/** The table as read at start (its text kept: a reload compares against it) and the logger at its level. */
async function readInitial(settings: GatewaySettings) {
  const overrides = settings.overrides ?? {};
  const initialText = await readConfigText(settings.configPath);
  const snapshot = parseConfig(initialText, settings.configPath, overrides);
  const log = settings.logger ?? createProcessLogger();
  log.level = snapshot.config.log.level;
  return { overrides, initialText, snapshot, cfg: snapshot.config, log };
}

export async function startGateway(settings: GatewaySettings): Promise<RunningGateway> {
  const { overrides, initialText, snapshot, cfg, log } = await readInitial(settings);

  const builtin = cfg.upstream.url === 'builtin' ? await startUpstream({ host: '127.0.0.1', port: 0 }) : undefined;
  const origin = new URL(builtin?.url ?? cfg.upstream.url).origin;
  const { metrics, storeCfg, storeHandle } = await openStore(cfg, settings, log);
  const upstream = upstreamClients(
    cfg,
    origin,
    { admission: () => policy.snapshot.config.server, observer: metrics.admissionObserver() },
    metrics,
  );
  // Named upstreams and the routes to them: built once, like the default pool (restart-only settings).
  const routes = UpstreamRoutes.build(cfg, upstream.admission);
  let policy: RequestPolicy = buildRequestPolicy(
    snapshot,
    upstream.introspect,
    undefined,
    (name) => guard.surges?.active(name) === true,
  );
  const runAdmin = settings.admin ?? true;
  const { probe, status } = watchUpstreamAndRates(cfg, origin, { storeHandle, metrics, runAdmin }, () => policy);
  const { guard, fleet } = await openGuard(
    storeCfg,
    storeHandle,
    metrics,
    log,
    () => policy.snapshot.config,
    status.published,
    settings.now,
  );
  // The drain's flag is the one that says "draining": the gateway and readiness read it.
  const drain = createDrain();
  const gateway = buildGateway({
    policy: () => policy,
    storeHandle,
    upstream,
    origin,
    routes,
    metrics,
    log,
    guard,
    settings,
    drain,
  });

  const { server, h2 } = await listenProxy(cfg, gateway, { metrics, log, configPath: settings.configPath }, drain);

  // Read at start and on every reload; a cluster worker has no admin listener and needs no token.
  let adminTokens = runAdmin ? await loadAdminCredentials(cfg.admin, settings.configPath) : [];
  const ready = createReadiness({
    upstream: probe,
    store: storeHandle,
    metrics,
    policy: () => policy,
    draining: () => drain.draining,
  });
  const api = {
    credentials: () => adminTokens,
    ...listenerFacts(cfg.admin.listen),
    policy: () => policy,
    store: storeHandle.store,
    guard,
    status,
    log,
  };
  const admin = createAdminServer({ metrics: metrics.registry, ready, api: { ...api, fleet } });
  if (runAdmin) await listenAdmin(admin, cfg, adminTokens.length === 0 && !api.loopbackOnly, log);

  const config = watchConfig(
    {
      configPath: settings.configPath,
      overrides,
      log,
      metrics,
      introspect: upstream.introspect,
      runAdmin,
      onReload: status.onReload,
      policy: () => policy,
      swap: (next, tokens) => {
        policy = next;
        adminTokens = tokens;
        guard.rulesInUse(followsStore(next.snapshot.config));
      },
    },
    initialText,
    settings.watch ?? true,
  );

  const url = urlOf(server);
  const adminUrl = runAdmin ? urlOf(admin) : '';
  logListening(log, {
    url,
    adminUrl,
    runAdmin,
    origin,
    cfg,
    store: storeHandle.kind,
    rules: snapshot.rules.length,
    configPath: settings.configPath,
  });

  return {
    url,
    adminUrl,
    upstreamUrl: origin,
    store: storeHandle,
    metrics,
    server,
    guard,
    snapshot: () => policy.snapshot,
    reload: () => config.reload(),
    // server.drainGrace is read when the drain starts, so a reload before SIGTERM changes it.
    shutdown: (graceMs = policy.snapshot.config.server.drainGrace) =>
      shutdownGateway(
        {
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
        },
        graceMs,
      ),
  };
}

/** The metrics, and the counters' store wired to them; the store settings returned are the guard's too. */
async function openStore(cfg: Config, settings: GatewaySettings, log: GatewayParts['log']) {
  const metrics = new Metrics({ collectDefault: settings.defaultMetrics ?? true });
  metrics.configLoaded(true, false);
  // The bucket bound is settled once, before the store opens: the memory store and the Redis store's
  // local fallback get it. The sentinels' password may come from a file (a mounted Secret): read once,
  // for the counters and the guard alike.
  const bound = effectiveMaxKeys(cfg.store.maxKeys);
  if (bound.derived !== null) {
    log.info(
      { maxKeys: bound.maxKeys, memoryLimit: bound.derived.bytes, from: bound.derived.source },
      `store.maxKeys ${bound.maxKeys} from the memory limit (${bound.derived.source})`,
    );
  }
  metrics.storeMaxKeys.set(bound.maxKeys);
  const storeCfg = {
    ...cfg.store,
    maxKeys: bound.maxKeys,
    sentinelPassword: await loadSentinelPassword(cfg.store, settings.configPath),
  };
  const storeHandle = await createStoreFor(storeCfg, {
    observer: metrics.storeObserver(),
    log,
    ...(settings.now ? { now: settings.now } : {}),
  });
  metrics.storeKeysProbe = () => storeHandle.localKeys();
  return { metrics, storeCfg, storeHandle };
}

/** The upstream's probe (metrics, readiness, the page) and the status page's sources. */
function watchUpstreamAndRates(
  cfg: Config,
  origin: string,
  o: { storeHandle: StoreHandle; metrics: Metrics; runAdmin: boolean },
  policy: () => RequestPolicy,
): { probe: UpstreamProbe; status: ReturnType<typeof createStatusSources> } {
  const probe = new UpstreamProbe(origin, cfg.upstream.healthPath, cfg.upstream.timeout);
  // Rates sampled where the page is served, and where they are published to the fleet (a shared store).
  const sample = o.runAdmin || o.storeHandle.can.redisProtocol;
  const status = createStatusSources({
    policy,
    metrics: o.metrics,
    store: o.storeHandle,
    storeUrl: cfg.store.url,
    upstream: probe,
    sample,
  });
  return { probe, status };
}

/** Runtime blocks, bans and triage; and, with a shared store, the fleet: how many gateways share it, their triage sketches and rates. */
async function openGuard(
  storeCfg: Config['store'] & { readonly maxKeys: number },
  storeHandle: StoreHandle,
  metrics: Metrics,
  log: GatewayParts['log'],
  config: () => Config,
  rates: () => string | undefined,
  now?: () => number,
) {
  const guard = await createGuard({ store: storeCfg, registry: metrics.registry, log, config, now });
  // `surges:` run on the guard: their state is its (kind surge), their counts are in the counter store.
  guard.surges = new Surges({ state: guard.state, now: guard.now, store: storeHandle.store, log, config });
  guard.rulesInUse(followsStore(config()));
  return { guard, fleet: joinFleet({ store: storeCfg, handle: storeHandle, metrics, top: guard.top, rates }) };
}

/** The proxy listener: requests, `Expect: 100-continue` and upgrades go to the gateway. */
/** How often the TLS listener's certificate files are looked at: a rotation is served within this (and a read). */
const CERTIFICATE_POLL_MS = 1_000;

async function listenProxy(
  cfg: Config,
  gateway: ReturnType<typeof buildGateway>,
  { metrics, log, configPath }: { metrics: Metrics; log: GatewayParts['log']; configPath: string },
  drain: ReturnType<typeof createDrain>,
): Promise<{ server: http.Server; h2: H2Edge | undefined }> {
  const tls =
    cfg.server.tls === null
      ? undefined
      : { settings: cfg.server.tls, pair: await certificateAtStart(cfg.server.tls, configPath) };
  const secure = tls === undefined ? undefined : secureOptions(tls.settings, tls.pair);
  // Refusals before the pipeline are counted and logged, the log sampled per reason (refusal-log.ts).
  const refusals = new RefusalLog(log);
  const onParserRefusal = (status: number, reason: ParserRefusal, code: string): void => {
    metrics.countGatewayAnswer(status);
    refusals.refused(reason, `refused ${status}: ${PARSER_REFUSALS[reason]}`, { status, code });
  };
  const onFragmented = (): void => metrics.fragmentedBodies.inc();
  const server = createProxyServer(
    cfg.server,
    gateway.handle,
    onParserRefusal,
    drain.ServerResponse,
    onFragmented,
    secure,
    cfg.server.http2,
  );
  server.once('close', () => refusals.flush());
  if (tls !== undefined) watchCertificate(server as https.Server, tls.settings, tls.pair, metrics, log);
  // HTTP/2 beside HTTP/1.1: chosen by ALPN over TLS, by the connection preface on plain TCP (after
  // the PROXY header, whose reader wraps what is set up here).
  const h2 = cfg.server.http2
    ? createH2Edge(cfg.server, gateway.handle, (reason) =>
        reason === 'fragmented_body' ? onFragmented() : metrics.http2Closed.labels(reason).inc(),
      )
    : undefined;
  if (h2 !== undefined && tls !== undefined) serveH2OnAlpn(server as https.Server, h2);
  else if (h2 !== undefined) sniffH2Preface(server, h2, cfg.server.headersTimeout);
  requireProxyHeader(server, compileCidrs(cfg.server.proxyProtocol.from), cfg.server.headersTimeout, (reason) => {
    metrics.proxyProtocolRefused.labels(reason).inc();
    refusals.refused(
      `proxy_protocol_${reason}`,
      `connection closed: ${reason === 'timeout' ? 'no PROXY header in time' : 'no valid PROXY header'}`,
    );
  });
  server.on('checkContinue', gateway.handle);
  // WebSocket is tunnelled; any other upgrade is served as the HTTP/1.1 request it also is.
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) =>
    isWebSocketUpgrade(req)
      ? gateway.handleUpgrade(req, socket, head)
      : serveAsPlainRequest(server, req, socket, head, metrics.countGatewayAnswer),
  );
  const listen = parseHostPort(cfg.listen)!;
  await listenOn(server, listen.host, listen.port);
  return { server, h2 };
}

/** The human reading of each parser refusal, for the log line's `msg`. */
const PARSER_REFUSALS: Record<ParserRefusal, string> = {
  headers_too_large: 'request header fields too large (server.maxHeaderSize)',
  request_timeout: 'the request did not arrive within server.headersTimeout or server.requestTimeout',
  unknown_method: 'unknown method',
  malformed: 'malformed request',
};

/** The TLS listener's pair at start: one that does not load is a config error, as a bad table is. */
async function certificateAtStart(s: TlsSettings, configPath: string): Promise<CertificatePair> {
  try {
    return await loadCertificatePair(s);
  } catch (err) {
    throw new ConfigError(configPath, [`server.tls: ${(err as Error).message}`]);
  }
}

/** A rotated pair is served to new connections; a broken one keeps the pair in force and says why. */
function watchCertificate(
  server: https.Server,
  s: TlsSettings,
  pair: CertificatePair,
  metrics: Metrics,
  log: GatewayParts['log'],
): void {
  const expiry = (p: CertificatePair): void => {
    metrics.tlsExpiry.reset();
    metrics.tlsExpiry.labels(p.name).set(p.expires);
  };
  expiry(pair);
  for (const result of ['success', 'error']) metrics.tlsReloads.labels(result).inc(0);
  const watch = watchCertificatePair(s, pair, CERTIFICATE_POLL_MS, {
    onLoaded(next) {
      server.setSecureContext(secureOptions(s, next));
      expiry(next);
      metrics.tlsReloads.labels('success').inc();
      log.info(
        { certFile: s.certFile, name: next.name, expires: new Date(next.expires * 1000).toISOString() },
        'tls: serving the new certificate',
      );
    },
    onRejected(reason) {
      metrics.tlsReloads.labels('error').inc();
      log.error({ certFile: s.certFile, reason }, 'tls: the new certificate does not load; the one in force stays');
    },
  });
  server.once('close', () => watch.stop());
}

function logListening(
  log: GatewayParts['log'],
  at: {
    url: string;
    adminUrl: string;
    runAdmin: boolean;
    origin: string;
    cfg: Config;
    store: string;
    rules: number;
    configPath: string;
  },
): void {
  const { url, adminUrl, runAdmin, origin, cfg, store, rules, configPath } = at;
  const upstreamText = cfg.upstream.url === 'builtin' ? `builtin at ${origin}` : origin;
  startupLog(log).info(
    { listen: url, admin: adminUrl, store, upstream: upstreamText, rules },
    `rategate listening on ${url}, admin ${runAdmin ? `on ${adminUrl}` : 'in the primary'}, store ${store}, upstream ${upstreamText}, ${rules} rules from ${configPath}`,
  );
  log.flush();
}

interface GatewayParts {
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
async function shutdownGateway(parts: GatewayParts, graceMs: number): Promise<void> {
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

/** The default upstream's proxy pool, and introspection on a pool of its own. `admission`: every proxy pool's (the server's live limits). */
function upstreamClients(
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

/** A shared guard state follows the store's changes continuously while bans or surges are configured (within 1 s). */
function followsStore(c: Config): boolean {
  return c.bans.length > 0 || c.surges.length > 0;
}

/** The pipeline, wired to the access log, the guard and the triage sketch. */
function buildGateway(o: {
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
      o.guard.top.add(rule, displayKey(key));
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

async function listenAdmin(admin: http.Server, cfg: Config, openWithoutToken: boolean, log: Logger): Promise<void> {
  const adminListen = parseHostPort(cfg.admin.listen)!;
  await listenOn(admin, adminListen.host, adminListen.port);
  if (openWithoutToken) {
    log.warn(
      { admin: cfg.admin.listen },
      `the admin listener ${cfg.admin.listen} is not loopback-only and no admin token is set: /admin/buckets is refused (403) until admin.token, RATEGATE_ADMIN_TOKEN or admin.tokenFile is set; /metrics, /healthz and /readyz stay open`,
    );
  }
}

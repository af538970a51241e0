/**
 * @module Composition root: builds the gateway from process settings and the limit table, and owns the
 * order of start-up and shutdown (reload: reload.ts; readiness: readiness.ts; the listener: http/listener.ts).
 */
import type http from 'node:http';
import type { Logger } from 'pino';
import { parseConfig, parseHostPort, readConfigText, type Config, type Snapshot } from '../config/index.js';
import type { StoreHandle } from '../limiter/factory.js';
import { createProcessLogger, startupLog } from '../observability/log.js';
import type { Metrics } from '../observability/metrics.js';
import { UpstreamRoutes } from '../proxy/routes.js';
import { createAdminServer } from '../admin/server.js';
import { listenerFacts, loadAdminCredentials } from '../admin/token.js';
import { createStatusSources } from '../admin/status-data.js';
import { createDrain } from '../http/drain.js';
import { listenOn, urlOf } from '../http/listener.js';
import { buildRequestPolicy, type RequestPolicy } from '../pipeline/policy.js';
import { createReadiness } from './readiness.js';
import { UpstreamProbe } from '../proxy/upstream-probe.js';
import { watchConfig } from './reload.js';
import { startUpstream } from '../mastodon/index.js';
import type { Guard } from '../guard/index.js';
import type { GatewaySettings } from './settings.js';
import { followsStore, openGuard, openStore } from './store-and-guard.js';
import { upstreamClients } from './upstream-clients.js';
import { buildGateway } from './build-gateway.js';
import { listenProxy } from './proxy-listener.js';
import { shutdownGateway } from './shutdown.js';

export type { GatewaySettings } from './settings.js';

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

function logListening(
  log: Logger,
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

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

/** What a reload swaps: every part reads the one in force through here. */
interface Live {
  policy: RequestPolicy;
  adminTokens: Awaited<ReturnType<typeof loadAdminCredentials>>;
}

type Initial = Awaited<ReturnType<typeof readInitial>>;
type Core = Awaited<ReturnType<typeof openCore>>;

export async function startGateway(settings: GatewaySettings): Promise<RunningGateway> {
  const init = await readInitial(settings);
  const core = await openCore(settings, init);
  const { cfg, log } = init;
  const proxy = await listenProxy(
    cfg,
    core.gateway,
    { metrics: core.metrics, log, configPath: settings.configPath },
    core.drain,
  );
  const admin = await openAdmin(settings, init, core);
  const config = watchTable(settings, init, core);
  const url = urlOf(proxy.server);
  const adminUrl = core.runAdmin ? urlOf(admin) : '';
  const rules = init.snapshot.rules.length;
  logListening(log, {
    url,
    adminUrl,
    runAdmin: core.runAdmin,
    origin: core.origin,
    cfg,
    store: core.storeHandle.kind,
    rules,
    configPath: settings.configPath,
  });
  const { live, storeHandle, metrics, guard } = core;
  return {
    url,
    adminUrl,
    upstreamUrl: core.origin,
    store: storeHandle,
    metrics,
    server: proxy.server,
    guard,
    snapshot: () => live.policy.snapshot,
    reload: () => config.reload(),
    // server.drainGrace is read when the drain starts, so a reload before SIGTERM changes it.
    shutdown: (graceMs = live.policy.snapshot.config.server.drainGrace) =>
      shutdownGateway({ ...core, config, log, server: proxy.server, h2: proxy.h2, admin }, graceMs),
  };
}

/** The store, the upstream pools, the policy, the guard and the gateway: everything before a listener. */
async function openCore(settings: GatewaySettings, init: Initial) {
  const { cfg, log } = init;
  const builtin = cfg.upstream.url === 'builtin' ? await startUpstream({ host: '127.0.0.1', port: 0 }) : undefined;
  const origin = new URL(builtin?.url ?? cfg.upstream.url).origin;
  const { metrics, storeCfg, storeHandle } = await openStore(cfg, settings, log);
  const admission = { admission: () => live.policy.snapshot.config.server, observer: metrics.admissionObserver() };
  const upstream = upstreamClients(cfg, origin, admission, metrics);
  // Named upstreams and the routes to them: built once, like the default pool (restart-only settings).
  const routes = UpstreamRoutes.build(cfg, upstream.admission);
  const surgeOn = (name: string): boolean => guard.surges?.active(name) === true;
  const live: Live = {
    policy: buildRequestPolicy(init.snapshot, upstream.introspect, undefined, surgeOn),
    adminTokens: [],
  };
  const runAdmin = settings.admin ?? true;
  const { probe, status } = watchUpstreamAndRates(cfg, origin, { storeHandle, metrics, runAdmin }, () => live.policy);
  const config = () => live.policy.snapshot.config;
  const { guard, fleet } = await openGuard(storeCfg, storeHandle, metrics, log, config, status.published, settings.now);
  // The drain's flag is the one that says "draining": the gateway and readiness read it.
  const drain = createDrain();
  const policy = () => live.policy;
  const gateway = buildGateway({ policy, storeHandle, upstream, origin, routes, metrics, log, guard, settings, drain });
  return {
    builtin,
    origin,
    metrics,
    storeHandle,
    upstream,
    routes,
    live,
    runAdmin,
    probe,
    status,
    guard,
    fleet,
    drain,
    gateway,
  };
}

/** The admin listener (metrics, probes, the admin API and status page); its tokens read at start and on every reload. */
async function openAdmin(settings: GatewaySettings, init: Initial, core: Core): Promise<http.Server> {
  const { cfg, log } = init;
  const { live, runAdmin, storeHandle, metrics, drain, guard, status, fleet } = core;
  // A cluster worker has no admin listener and needs no token.
  live.adminTokens = runAdmin ? await loadAdminCredentials(cfg.admin, settings.configPath) : [];
  const policy = () => live.policy;
  const ready = createReadiness({
    upstream: core.probe,
    store: storeHandle,
    metrics,
    policy,
    draining: () => drain.draining,
  });
  const facts = listenerFacts(cfg.admin.listen);
  const api = { credentials: () => live.adminTokens, ...facts, policy, store: storeHandle.store, guard, status, log };
  const admin = createAdminServer({ metrics: metrics.registry, ready, api: { ...api, fleet } });
  if (runAdmin) await listenAdmin(admin, cfg, live.adminTokens.length === 0 && !api.loopbackOnly, log);
  return admin;
}

/** The config file watched: a new table swapped in whole (policy, admin tokens, the guard's rules), or refused. */
function watchTable(settings: GatewaySettings, init: Initial, core: Core): ReturnType<typeof watchConfig> {
  const { live, guard } = core;
  const swap = (next: RequestPolicy, tokens: Live['adminTokens']): void => {
    live.policy = next;
    live.adminTokens = tokens;
    guard.rulesInUse(followsStore(next.snapshot.config));
  };
  const options = {
    configPath: settings.configPath,
    overrides: init.overrides,
    log: init.log,
    metrics: core.metrics,
    introspect: core.upstream.introspect,
    runAdmin: core.runAdmin,
    onReload: core.status.onReload,
    policy: () => live.policy,
    swap,
  };
  return watchConfig(options, init.initialText, settings.watch ?? true);
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

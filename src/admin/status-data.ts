/**
 * @module What the status page shows, as data (`GET /status.json`): the rules with their live rates, the
 * store and its nodes, leases and the fallback, and — exactly as the admin API answers them — bans,
 * blocks, exemptions and the top limited keys; the last reloads; surges where the table has them.
 */
import os from 'node:os';
import type http from 'node:http';
import { formatDuration } from '../config/fields/duration.js';
import { parseStoreUrl, redactStoreUrl } from '../config/store-url.js';
import type { FleetSketches } from '../fleet/fleet.js';
import type { Guard } from '../guard/guard.js';
import type { SurgeSummary } from '../surge/report.js';
import type { StoreHandle } from '../limiter/factory.js';
import type { Metrics } from '../observability/metrics.js';
import { VERSION } from '../observability/version.js';
import type { RequestPolicy } from '../pipeline/policy.js';
import { guardEndpoint, type AdminAnswer } from './guard-api.js';
import { RuleRates, type DecisionRates, type RateWindow } from './rates.js';
import { ReloadHistory, type ReloadOutcome, type ReloadRecord } from './reloads.js';

/** A surge of the table (surge/surges.ts `status`); the page shows the section only when there is one. */
/** The live sources the page reads besides the admin API's own (policy, guard). */
export interface StatusSources {
  readonly rates: RuleRates;
  readonly reloads: ReloadHistory;
  readonly store: Pick<StoreHandle, 'kind' | 'fallbackActive' | 'leases'>;
  /** The store URL the gateway started with (store.url applies at restart only). */
  readonly storeUrl: string;
  readonly metrics: Pick<Metrics, 'storeNodeUp' | 'storeProbe'>;
  /** Surges and their state, once the table has them. */
  readonly surges?: () => readonly SurgeSummary[];
}

export interface RuleStatus {
  readonly name: string;
  readonly match: readonly string[];
  readonly per: string;
  readonly limit: number;
  readonly period: string;
  readonly algorithm: string;
  readonly shadow: boolean;
  readonly rates: Record<RateWindow, DecisionRates>;
}

export interface StoreStatus {
  readonly kind: StoreHandle['kind'];
  /** Password hidden. */
  readonly url: string;
  readonly onError: string;
  /** Whether decisions come from the store now (the bounded, cached probe /metrics reads); null when not probed. */
  readonly reachable: boolean | null;
  readonly fallbackActive: boolean;
  /** Redis masters: `up` false while their calls fail and their keys follow onError. */
  readonly nodes: readonly { readonly node: string; readonly up: boolean }[];
  /** The lease layer (docs/leases.md), null when off. */
  readonly leases: { readonly heldTokens: number; readonly localAdmissions: number } | null;
}

export interface StatusData {
  readonly generatedAt: string;
  readonly version: string;
  /** This replica: the host name (the pod's name in Kubernetes) and process id. */
  readonly replica: { readonly host: string; readonly pid: number };
  readonly auth: { readonly tokenRequired: boolean };
  readonly rules: readonly RuleStatus[];
  readonly store: StoreStatus;
  /** The bodies of GET /admin/bans, /admin/blocks, /admin/exemptions (or `{error}`); null without a guard. */
  readonly bans: unknown;
  readonly blocks: unknown;
  readonly exemptions: unknown;
  /** Per recently limited rule, the body of GET /admin/limited?rule=NAME&top=10. */
  readonly limited: readonly unknown[];
  readonly reloads: readonly ReloadRecord[];
  readonly surges: readonly SurgeSummary[];
}

/** Top keys asked per rule, and rules shown at most: the page stays small whatever the table. */
export const TOP_PER_RULE = 10;
export const MAX_LIMITED_RULES = 20;

/** The page's live sources for a gateway: rates sampled in the background (when `sample`), reloads recorded. */
export function createStatusSources(o: {
  policy: () => RequestPolicy;
  metrics: Metrics;
  store: StoreHandle;
  storeUrl: string;
  sample: boolean;
}): StatusSources & { readonly onReload: (outcome: ReloadOutcome) => void; stop(): void } {
  const rates = new RuleRates({ rules: () => o.policy().snapshot.rules.map((r) => r.name), counts: (name) => o.metrics.forRule(name) });
  if (o.sample) rates.start();
  const reloads = new ReloadHistory();
  reloads.started(o.policy().snapshot.rules.length);
  return { rates, reloads, store: o.store, storeUrl: o.storeUrl, metrics: o.metrics, onReload: reloads.record, stop: () => rates.stop() };
}

export async function statusData(
  req: http.IncomingMessage,
  s: StatusSources,
  policy: RequestPolicy,
  guard: Guard | undefined,
  tokenRequired: boolean,
  /** The replicas sharing the store: the top limited keys are then theirs, as GET /admin/limited answers. */
  fleet?: FleetSketches,
): Promise<StatusData> {
  const ask = (path: string, query = ''): Promise<AdminAnswer | null> =>
    guard === undefined
      ? Promise.resolve(null)
      : guardEndpoint(req, path, new URLSearchParams(query), policy, guard, { fleet }).catch((err: Error) => ({
          status: 503,
          body: { error: `store: ${err.message}` },
        }));
  const [bans, blocks, exemptions, limited, store] = await Promise.all([
    ask('/admin/bans'),
    ask('/admin/blocks'),
    ask('/admin/exemptions'),
    limitedAnswers(ask, policy),
    storeStatus(s, policy),
  ]);
  return {
    generatedAt: new Date().toISOString(),
    version: VERSION,
    replica: { host: os.hostname(), pid: process.pid },
    auth: { tokenRequired },
    rules: policy.snapshot.rules.map((r) => ({
      name: r.name,
      match: r.patterns,
      per: r.key.label,
      limit: r.limit,
      period: formatDuration(r.periodMs),
      algorithm: r.algorithm,
      shadow: r.shadow,
      rates: { '1m': s.rates.rates(r.name, '1m'), '5m': s.rates.rates(r.name, '5m') },
    })),
    store,
    bans: bodyOf(bans),
    blocks: bodyOf(blocks),
    exemptions: bodyOf(exemptions),
    limited,
    reloads: s.reloads.list(),
    surges: guard?.surges?.status() ?? s.surges?.() ?? [],
  };
}

/** What /admin/limited answers for each rule it names as recently limited (all rules if it names none). */
async function limitedAnswers(ask: (path: string, query?: string) => Promise<AdminAnswer | null>, policy: RequestPolicy): Promise<unknown[]> {
  const index = await ask('/admin/limited');
  if (index === null) return [];
  const named = (index.body as { recentlyLimited?: unknown }).recentlyLimited;
  const rules = Array.isArray(named) ? named.filter((r): r is string => typeof r === 'string') : policy.snapshot.rules.map((r) => r.name);
  const answers = await Promise.all(
    rules.slice(0, MAX_LIMITED_RULES).map((rule) => ask('/admin/limited', `rule=${encodeURIComponent(rule)}&top=${TOP_PER_RULE}`)),
  );
  return answers.flatMap((a) => (a === null ? [] : [bodyOf(a)]));
}

function bodyOf(a: AdminAnswer | null): unknown {
  if (a === null) return null;
  return a.status < 300 ? a.body : { error: (a.body as { error?: unknown }).error ?? `status ${a.status}` };
}

async function storeStatus(s: StatusSources, policy: RequestPolicy): Promise<StoreStatus> {
  const reachable = s.metrics.storeProbe === undefined ? null : await s.metrics.storeProbe();
  const reported = (await s.metrics.storeNodeUp.get()).values.map((v) => ({ node: String(v.labels.node), up: v.value === 1 }));
  const nodes = new Map(reported.map((n) => [n.node, n]));
  // A single master is known from the URL (named as the Redis store names it); a cluster's masters are
  // listed once the store has reported on them (their first failure or recovery).
  const single = singleNodeOf(s.storeUrl);
  if (single !== null && !nodes.has(single)) nodes.set(single, { node: single, up: reachable !== false && !s.store.fallbackActive() });
  const leases = s.store.leases;
  return {
    kind: s.store.kind,
    url: redactStoreUrl(s.storeUrl),
    onError: policy.snapshot.config.store.onError,
    reachable,
    fallbackActive: s.store.fallbackActive(),
    nodes: [...nodes.values()],
    leases: leases === undefined ? null : { heldTokens: leases.heldTokens(), localAdmissions: leases.localAdmissions },
  };
}

function singleNodeOf(storeUrl: string): string | null {
  const url = parseStoreUrl(storeUrl);
  switch (url.kind) {
    case 'redis':
      return url.socket ?? `${url.node.host}:${url.node.port}`;
    case 'redis-sentinel':
      return url.name;
    case 'memory':
    case 'redis-cluster':
      return null;
  }
}

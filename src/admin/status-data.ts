/**
 * @module What the status page shows, as data (`GET /status.json`): the rules with their live rates, every
 * replica's rates (as they publish them to a shared store), the upstream (its probe, latency, errors), the
 * store and its nodes, leases and the fallback, and — exactly as the admin API answers them — bans,
 * blocks, exemptions and the top limited keys; the last reloads; surges where the table has them.
 */
import os from 'node:os';
import type http from 'node:http';
import { formatDuration } from '../config/fields/duration.js';
import { parseStoreUrl, redactStoreUrl } from '../config/store-url.js';
import type { FleetSketches } from '../fleet/fleet.js';
import { decodeRates, type PublishedRates } from '../fleet/rates.js';
import type { Guard } from '../guard/guard.js';
import { VERSION } from '../observability/version.js';
import type { RequestPolicy } from '../pipeline/policy.js';
import { guardEndpoint, type AdminAnswer } from './guard-api.js';
import type { RateWindow } from './rates.js';
import type {
  FleetStatus,
  ReplicaStatus,
  StatusData,
  StatusSources,
  StoreStatus,
  UpstreamStatus,
} from './status-types.js';

export type {
  FleetStatus,
  ReplicaStatus,
  RuleStatus,
  StatusData,
  StatusSources,
  StoreStatus,
  UpstreamStatus,
} from './status-types.js';
export { createStatusSources } from './status-sources.js';

/** Top keys asked per rule, and rules shown at most: the page stays small whatever the table. */
export const TOP_PER_RULE = 10;

export const MAX_LIMITED_RULES = 20;

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
  const [bans, blocks, exemptions, limited, store, upstream, fleetStatus] = await Promise.all([
    ask('/admin/bans'),
    ask('/admin/blocks'),
    ask('/admin/exemptions'),
    limitedAnswers(ask, policy),
    storeStatus(s, policy),
    upstreamStatus(s, policy),
    fleetOf(s, policy, fleet),
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
    upstream,
    fleet: fleetStatus,
    bans: bodyOf(bans),
    blocks: bodyOf(blocks),
    exemptions: bodyOf(exemptions),
    limited,
    reloads: s.reloads.list(),
    surges: guard?.surges?.status() ?? s.surges?.() ?? [],
  };
}

/** What /admin/limited answers for each rule it names as recently limited (all rules if it names none). */
async function limitedAnswers(
  ask: (path: string, query?: string) => Promise<AdminAnswer | null>,
  policy: RequestPolicy,
): Promise<unknown[]> {
  const index = await ask('/admin/limited');
  if (index === null) return [];
  const named = (index.body as { recentlyLimited?: unknown }).recentlyLimited;
  const rules = Array.isArray(named)
    ? named.filter((r): r is string => typeof r === 'string')
    : policy.snapshot.rules.map((r) => r.name);
  const answers = await Promise.all(
    rules
      .slice(0, MAX_LIMITED_RULES)
      .map((rule) => ask('/admin/limited', `rule=${encodeURIComponent(rule)}&top=${TOP_PER_RULE}`)),
  );
  return answers.flatMap((a) => (a === null ? [] : [bodyOf(a)]));
}

function bodyOf(a: AdminAnswer | null): unknown {
  if (a === null) return null;
  return a.status < 300 ? a.body : { error: (a.body as { error?: unknown }).error ?? `status ${a.status}` };
}

async function storeStatus(s: StatusSources, policy: RequestPolicy): Promise<StoreStatus> {
  const reachable = s.metrics.storeProbe === undefined ? null : await s.metrics.storeProbe();
  const reported = (await s.metrics.storeNodeUp.get()).values.map((v) => ({
    node: String(v.labels.node),
    up: v.value === 1,
  }));
  const nodes = new Map(reported.map((n) => [n.node, n]));
  // A single master is known from the URL (named as the Redis store names it); a cluster's masters are
  // listed once the store has reported on them (their first failure or recovery).
  const single = singleNodeOf(s.storeUrl);
  if (single !== null && !nodes.has(single))
    nodes.set(single, { node: single, up: reachable !== false && !s.store.fallbackActive() });
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

/** This replica's rates summed over the rules in force. */
function ownTotals(s: StatusSources, policy: RequestPolicy): Record<RateWindow, PublishedRates> {
  const sum = (w: RateWindow): PublishedRates => {
    let allowed = 0;
    let limited = 0;
    let shadowLimited = 0;
    for (const r of policy.snapshot.rules) {
      const d = s.rates.rates(r.name, w);
      allowed += d.allowed;
      limited += d.limited;
      shadowLimited += d.shadowLimited;
    }
    return { allowed, limited, shadowLimited };
  };
  return { '1m': sum('1m'), '5m': sum('5m') };
}

/** Every replica's rates: this one's live, the others' as they last published them (every heartbeat, 5 s). */
async function fleetOf(
  s: StatusSources,
  policy: RequestPolicy,
  fleet: FleetSketches | undefined,
): Promise<FleetStatus | null> {
  if (fleet === undefined) return null;
  const self: ReplicaStatus = {
    id: fleet.id,
    host: os.hostname(),
    pid: process.pid,
    self: true,
    age: 0,
    rates: ownTotals(s, policy),
  };
  let published: { id: string; json: string }[];
  try {
    published = (await fleet.rates?.()) ?? [];
  } catch (err) {
    return { gateways: fleet.gateways, replicas: [self], error: `store: ${(err as Error).message}` };
  }
  const now = Date.now();
  const others: ReplicaStatus[] = [];
  for (const p of published) {
    const r = p.id === fleet.id ? undefined : decodeRates(p.json);
    if (r === undefined) continue;
    const total = (i: 0 | 1): PublishedRates => {
      let allowed = 0;
      let limited = 0;
      let shadowLimited = 0;
      for (const pair of Object.values(r.rules)) {
        allowed += pair[i].allowed;
        limited += pair[i].limited;
        shadowLimited += pair[i].shadowLimited;
      }
      return { allowed, limited, shadowLimited };
    };
    others.push({
      id: p.id,
      host: r.host,
      pid: r.pid,
      self: false,
      age: Math.max(0, Math.round((now - r.at) / 1000)),
      rates: { '1m': total(0), '5m': total(1) },
    });
  }
  others.sort((a, b) => a.id.localeCompare(b.id));
  return { gateways: fleet.gateways, replicas: [self, ...others] };
}

/** The upstream: its probe, and since start its answers' latency (bucket bounds) and its failures. */
async function upstreamStatus(s: StatusSources, policy: RequestPolicy): Promise<UpstreamStatus> {
  const probe = (await s.upstream?.read()) ?? null;
  const buckets = new Map<string, number>();
  let answered = 0;
  let upstream5xx = 0;
  for (const v of s.metrics.upstreamDuration.get().values) {
    if (v.metricName.endsWith('_bucket'))
      buckets.set(String(v.labels.le), (buckets.get(String(v.labels.le)) ?? 0) + v.value);
    else if (v.metricName.endsWith('_count')) {
      answered += v.value;
      if (v.labels.status_class === '5xx') upstream5xx += v.value;
    }
  }
  const bound = (q: number): number | null => {
    if (answered === 0) return null;
    for (const [le, n] of buckets) if (le !== '+Inf' && n >= q * answered) return Number(le) * 1000;
    return Infinity;
  };
  const errors: Record<string, number> = {};
  for (const v of (await s.metrics.upstreamErrors.get()).values)
    if (v.value > 0) errors[String(v.labels.reason)] = v.value;
  const url = policy.snapshot.config.upstream.url;
  return {
    url: url === 'builtin' ? 'builtin' : new URL(url).origin,
    probe,
    answered,
    p50Ms: bound(0.5),
    p99Ms: bound(0.99),
    errors,
    upstream5xx,
  };
}

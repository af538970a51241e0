/**
 * @module What the status page shows, as types (`GET /status.json`'s StatusData), and the live sources
 * it is read from besides the admin API (StatusSources).
 */
import type { PublishedRates } from '../fleet/rates.js';
import type { SurgeSummary } from '../surge/report.js';
import type { StoreHandle } from '../limiter/factory.js';
import type { Metrics } from '../observability/metrics.js';
import type { ProbeResult, UpstreamProbe } from '../proxy/upstream-probe.js';
import type { RuleRates, DecisionRates, RateWindow } from './rates.js';
import type { ReloadHistory, ReloadRecord } from './reloads.js';

/** A surge of the table (surge/surges.ts `status`); the page shows the section only when there is one. */
/** The live sources the page reads besides the admin API's own (policy, guard). */
export interface StatusSources {
  readonly rates: RuleRates;
  readonly reloads: ReloadHistory;
  readonly store: Pick<StoreHandle, 'kind' | 'fallbackActive' | 'leases'>;
  /** The store URL the gateway started with (store.url applies at restart only). */
  readonly storeUrl: string;
  readonly metrics: Pick<
    Metrics,
    'storeNodeUp' | 'storeProbe' | 'upstreamDuration' | 'upstreamErrors' | 'gatewayResponses'
  >;
  /** The default upstream's probe (the one rategate_upstream_up reads). */
  readonly upstream?: Pick<UpstreamProbe, 'read'>;
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

/** Requests per second by decision, summed over the rules, over the last minute and five minutes. */
export interface ReplicaStatus {
  /** The fleet member id (host:pid:random). */
  readonly id: string;
  readonly host: string;
  readonly pid: number;
  /** This replica (its rates live, the others' as published). */
  readonly self: boolean;
  /** Seconds since the rates were published (0 for this replica). */
  readonly age: number;
  readonly rates: Record<RateWindow, PublishedRates>;
}

export interface FleetStatus {
  /** Live gateways by their heartbeats (every --workers worker counts). */
  readonly gateways: number;
  readonly replicas: readonly ReplicaStatus[];
  /** Why the others' rates could not be read (the store failing). */
  readonly error?: string;
}

export interface UpstreamStatus {
  readonly url: string;
  /** The last probe: null before the first has ended. */
  readonly probe: ProbeResult | null;
  /** Forwarded requests answered since start, and the bounds their p50 and p99 fall under (ms; null: none yet). */
  readonly answered: number;
  readonly p50Ms: number | null;
  readonly p99Ms: number | null;
  /** Since start: requests that got no upstream answer, by reason; the 5xx the upstream answered itself. */
  readonly errors: Record<string, number>;
  readonly upstream5xx: number;
}

export interface StatusData {
  readonly generatedAt: string;
  readonly version: string;
  /** This replica: the host name (the pod's name in Kubernetes) and process id. */
  readonly replica: { readonly host: string; readonly pid: number };
  readonly auth: { readonly tokenRequired: boolean };
  readonly rules: readonly RuleStatus[];
  readonly store: StoreStatus;
  readonly upstream: UpstreamStatus;
  /** Every replica sharing the store, null with a store of this process only. */
  readonly fleet: FleetStatus | null;
  /** The bodies of GET /admin/bans, /admin/blocks, /admin/exemptions (or `{error}`); null without a guard. */
  readonly bans: unknown;
  readonly blocks: unknown;
  readonly exemptions: unknown;
  /** Per recently limited rule, the body of GET /admin/limited?rule=NAME&top=10. */
  readonly limited: readonly unknown[];
  readonly reloads: readonly ReloadRecord[];
  readonly surges: readonly SurgeSummary[];
}

/**
 * @module The attack-day metrics (bans, runtime blocks, in-flight refusals), registered on the gateway's
 * registry beside metrics.ts's own. Labels carry ban and rule names only, never a key.
 */
import type client from 'prom-client';
import { metricMaker, type MetricMaker } from '../observability/define-metrics.js';

export interface GuardGauges {
  /** Live bans per ban name, runtime blocks and exemptions, read at scrape time. */
  bansActive(): ReadonlyMap<string, number>;
  blocksActive(): { config: number; runtime: number };
  exemptionsActive(): { config: number; runtime: number };
  /** Per surge of the table (`surges:`): whether it is on now. */
  surgesActive?(): ReadonlyMap<string, boolean>;
}

/** What each attack-day metric counts (its HELP line, and its row in docs/operations.md). */
const HELP = {
  rategate_banned_requests_total: 'Requests refused 403 because their key is banned, by ban.',
  rategate_bans_started_total: 'Bans started by this replica, by ban.',
  rategate_bans_dropped_total:
    'Live bans ended early by this replica because their ban held its cap of live bans (bans[].maxActive): the oldest go first.',
  rategate_guard_restores_total:
    'Times this replica found the store had lost runtime blocks, exemptions or bans (flushed, restarted empty, stale replica promoted) and wrote its own back.',
  rategate_guard_resyncs_total:
    'Times this replica read the whole guard state again (at start, or behind the change log) instead of the changes alone.',
  rategate_concurrency_limited_total: 'Requests refused 429 by an in-flight limit, by rule.',
  rategate_blocked_requests_total: 'Requests refused 403 by a block (config: block.ips; runtime: the admin API).',
  rategate_bans_active: 'Keys banned now, by ban (as this replica sees the store).',
  rategate_surge_active:
    'Whether a surge (surges: in limits.yaml) is on now, by surge: 1 on, 0 off (as this replica sees the store).',
  rategate_blocks_active: 'IP/CIDR blocks in force, by source (config or runtime).',
  rategate_exemptions_active: 'IP/CIDR exemptions in force, by source (config or runtime).',
} as const;

type Make = MetricMaker<keyof typeof HELP>;

export class GuardMetrics {
  readonly bannedRequests: client.Counter<'ban'>;
  readonly bansStarted: client.Counter<'ban'>;
  readonly bansDropped: client.Counter<'ban'>;
  readonly restores: client.Counter;
  readonly resyncs: client.Counter;
  readonly concurrencyLimited: client.Counter<'rule'>;
  readonly blockedRequests: client.Counter<'source'>;

  constructor(registry: client.Registry, gauges: () => GuardGauges | null, banNames: () => readonly string[]) {
    const make = metricMaker(registry, HELP);
    this.bannedRequests = make.counter('rategate_banned_requests_total', { labelNames: ['ban'] });
    // Ban names come from the table, which a reload changes: each shows at 0 from the scrape after it is named.
    const eachBanAtZero = function (this: client.Counter<'ban'>): void {
      for (const name of banNames()) this.labels(name).inc(0);
    };
    this.bansStarted = make.counter('rategate_bans_started_total', { labelNames: ['ban'], collect: eachBanAtZero });
    this.bansDropped = make.counter('rategate_bans_dropped_total', { labelNames: ['ban'], collect: eachBanAtZero });
    this.restores = make.counter('rategate_guard_restores_total');
    this.resyncs = make.counter('rategate_guard_resyncs_total');
    this.concurrencyLimited = make.counter('rategate_concurrency_limited_total', { labelNames: ['rule'] });
    this.blockedRequests = make.counter('rategate_blocked_requests_total', { labelNames: ['source'] });
    for (const s of ['config', 'runtime']) this.blockedRequests.labels(s).inc(0);
    registerGauges(make, gauges, banNames);
  }
}

/** The gauges, read at scrape time: live bans per ban, blocks and exemptions per source. */
function registerGauges(make: Make, gauges: () => GuardGauges | null, banNames: () => readonly string[]): void {
  make.gauge('rategate_bans_active', {
    labelNames: ['ban'],
    collect() {
      this.reset();
      const g = gauges();
      for (const name of banNames()) this.labels(name).set(0);
      for (const [ban, n] of g?.bansActive() ?? []) this.labels(ban).set(n);
    },
  });
  make.gauge('rategate_surge_active', {
    labelNames: ['surge'],
    collect() {
      this.reset();
      for (const [surge, on] of gauges()?.surgesActive?.() ?? []) this.labels(surge).set(on ? 1 : 0);
    },
  });
  // Blocks and exemptions alike: per source, config and runtime.
  for (const [name, read] of [
    ['rategate_blocks_active', (g: GuardGauges) => g.blocksActive()],
    ['rategate_exemptions_active', (g: GuardGauges) => g.exemptionsActive()],
  ] as const) {
    make.gauge(name, {
      labelNames: ['source'],
      collect() {
        const g = gauges();
        const b = g ? read(g) : { config: 0, runtime: 0 };
        this.labels('config').set(b.config);
        this.labels('runtime').set(b.runtime);
      },
    });
  }
}

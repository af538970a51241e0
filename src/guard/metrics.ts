/**
 * @module The attack-day metrics (bans, runtime blocks, in-flight refusals), registered on the gateway's
 * registry beside metrics.ts's own. Labels carry ban and rule names only, never a key.
 */
import client from 'prom-client';

export interface GuardGauges {
  /** Live bans per ban name, runtime blocks and exemptions, read at scrape time. */
  bansActive(): ReadonlyMap<string, number>;
  blocksActive(): { config: number; runtime: number };
  exemptionsActive(): { config: number; runtime: number };
  /** Per surge of the table (`surges:`): whether it is on now. */
  surgesActive?(): ReadonlyMap<string, boolean>;
}

export class GuardMetrics {
  readonly bannedRequests: client.Counter<'ban'>;
  readonly bansStarted: client.Counter<'ban'>;
  readonly bansDropped: client.Counter<'ban'>;
  readonly restores: client.Counter;
  readonly resyncs: client.Counter;
  readonly concurrencyLimited: client.Counter<'rule'>;
  readonly blockedRequests: client.Counter<'source'>;

  constructor(registry: client.Registry, gauges: () => GuardGauges | null, banNames: () => readonly string[]) {
    const registers = [registry];
    this.bannedRequests = new client.Counter({
      name: 'rategate_banned_requests_total',
      help: 'Requests refused 403 because their key is banned, by ban.',
      labelNames: ['ban'],
      registers,
    });
    // Ban names come from the table, which a reload changes: each shows at 0 from the scrape after it is named.
    const eachBanAtZero = function (this: client.Counter<'ban'>): void {
      for (const name of banNames()) this.labels(name).inc(0);
    };
    this.bansStarted = new client.Counter({
      name: 'rategate_bans_started_total',
      help: 'Bans started by this replica, by ban.',
      labelNames: ['ban'],
      registers,
      collect: eachBanAtZero,
    });
    this.bansDropped = new client.Counter({
      name: 'rategate_bans_dropped_total',
      help: 'Live bans ended early by this replica because their ban held its cap of live bans (bans[].maxActive): the oldest go first.',
      labelNames: ['ban'],
      registers,
      collect: eachBanAtZero,
    });
    this.restores = new client.Counter({
      name: 'rategate_guard_restores_total',
      help: 'Times this replica found the store had lost runtime blocks, exemptions or bans (flushed, restarted empty, stale replica promoted) and wrote its own back.',
      registers,
    });
    this.resyncs = new client.Counter({
      name: 'rategate_guard_resyncs_total',
      help: 'Times this replica read the whole guard state again (at start, or behind the change log) instead of the changes alone.',
      registers,
    });
    this.concurrencyLimited = new client.Counter({
      name: 'rategate_concurrency_limited_total',
      help: 'Requests refused 429 by an in-flight limit, by rule.',
      labelNames: ['rule'],
      registers,
    });
    this.blockedRequests = new client.Counter({
      name: 'rategate_blocked_requests_total',
      help: 'Requests refused 403 by a block (config: block.ips; runtime: the admin API).',
      labelNames: ['source'],
      registers,
    });
    for (const s of ['config', 'runtime']) this.blockedRequests.labels(s).inc(0);
    registerGauges(registers, gauges, banNames);
  }
}

/** The gauges, read at scrape time: live bans per ban, blocks and exemptions per source. */
function registerGauges(registers: client.Registry[], gauges: () => GuardGauges | null, banNames: () => readonly string[]): void {
  new client.Gauge({
    name: 'rategate_bans_active',
    help: 'Keys banned now, by ban (as this replica sees the store).',
    labelNames: ['ban'],
    registers,
    collect() {
      this.reset();
      const g = gauges();
      for (const name of banNames()) this.labels(name).set(0);
      for (const [ban, n] of g?.bansActive() ?? []) this.labels(ban).set(n);
    },
  });
  new client.Gauge({
    name: 'rategate_surge_active',
    help: 'Whether a surge (surges: in limits.yaml) is on now, by surge: 1 on, 0 off (as this replica sees the store).',
    labelNames: ['surge'],
    registers,
    collect() {
      this.reset();
      for (const [surge, on] of gauges()?.surgesActive?.() ?? []) this.labels(surge).set(on ? 1 : 0);
    },
  });
  new client.Gauge({
    name: 'rategate_blocks_active',
    help: 'IP/CIDR blocks in force, by source (config or runtime).',
    labelNames: ['source'],
    registers,
    collect() {
      const b = gauges()?.blocksActive() ?? { config: 0, runtime: 0 };
      this.labels('config').set(b.config);
      this.labels('runtime').set(b.runtime);
    },
  });
  new client.Gauge({
    name: 'rategate_exemptions_active',
    help: 'IP/CIDR exemptions in force, by source (config or runtime).',
    labelNames: ['source'],
    registers,
    collect() {
      const b = gauges()?.exemptionsActive() ?? { config: 0, runtime: 0 };
      this.labels('config').set(b.config);
      this.labels('runtime').set(b.runtime);
    },
  });
}

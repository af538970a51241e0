/**
 * @module The status page's live sources for a gateway: the rules' rates (sampled in the background),
 * the reload history, and what this replica publishes of its rates with its heartbeat.
 */
import os from 'node:os';
import { encodeRates } from '../fleet/rates.js';
import type { StoreHandle } from '../limiter/factory.js';
import type { Metrics } from '../observability/metrics.js';
import type { RequestPolicy } from '../pipeline/policy.js';
import type { UpstreamProbe } from '../proxy/upstream-probe.js';
import { RuleRates } from './rates.js';
import { ReloadHistory, type ReloadOutcome } from './reloads.js';
import type { StatusSources } from './status-types.js';

/** The page's live sources for a gateway: rates sampled in the background (when `sample`), reloads recorded. */
export function createStatusSources(o: {
  policy: () => RequestPolicy;
  metrics: Metrics;
  store: StoreHandle;
  storeUrl: string;
  upstream?: UpstreamProbe;
  sample: boolean;
}): StatusSources & {
  readonly onReload: (outcome: ReloadOutcome) => void;
  readonly published: () => string;
  stop(): void;
} {
  const rules = (): string[] => o.policy().snapshot.rules.map((r) => r.name);
  const rates = new RuleRates({ rules, counts: (name) => o.metrics.forRule(name) });
  if (o.sample) rates.start();
  const reloads = new ReloadHistory();
  reloads.started(o.policy().snapshot.rules.length);
  // What this replica publishes with its heartbeat: a peek, so that publishing alone keeps the sampling coarse.
  const published = (): string =>
    encodeRates({
      host: os.hostname(),
      pid: process.pid,
      at: Date.now(),
      rules: Object.fromEntries(
        rules().map((r) => [r, [rates.rates(r, '1m', false), rates.rates(r, '5m', false)] as const]),
      ),
    });
  const upstream = o.upstream !== undefined ? { upstream: o.upstream } : {};
  return {
    rates,
    reloads,
    store: o.store,
    storeUrl: o.storeUrl,
    metrics: o.metrics,
    ...upstream,
    onReload: reloads.record,
    published,
    stop: () => rates.stop(),
  };
}

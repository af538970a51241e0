/** @module Readiness of a single process: what /readyz checks (config, serving; the upstream and the store only when asked). */
import type { StoreHandle } from '../limiter/factory.js';
import type { Metrics } from '../observability/metrics.js';
import type { RequestPolicy } from '../pipeline/policy.js';
import type { UpstreamProbe } from '../proxy/upstream-probe.js';

export interface ReadinessReport {
  ready: boolean;
  checks: Record<string, boolean>;
  details?: Record<string, unknown>;
}

/**
 * The /readyz answer. Readiness means "can serve": config loaded, listening, not draining. Every replica
 * shares the upstream and the store, so failing readiness on either would take every endpoint away at
 * once (and blocks, bans and 429s with it); both are reported in the body (and as metrics) and count
 * only when asked (`readiness.upstream`, `store.failReadiness`). Probes run at most once a second,
 * whatever the rate of probes and scrapes; they are also the ones the metrics read. The upstream's is a
 * real request (proxy/upstream-probe.ts): a frozen upstream accepts connections and answers nothing.
 */
export function createReadiness(opts: {
  /** The default upstream's probe (proxy/upstream-probe.ts): it answers within a second, whatever the upstream does. */
  upstream: UpstreamProbe;
  store: StoreHandle;
  metrics: Metrics;
  policy: () => RequestPolicy;
  draining: () => boolean;
}): () => Promise<ReadinessReport> {
  const upstreamProbe = (): Promise<boolean> => opts.upstream.up();
  const storeProbe = cached(() => opts.store.reachable());
  opts.metrics.storeProbe = storeProbe;
  opts.metrics.upstreamProbe = upstreamProbe;
  return async () => {
    const [reachable, upstreamReachable] = await Promise.all([storeProbe(), upstreamProbe()]);
    const config = opts.policy().snapshot.config;
    const checks: Record<string, boolean> = { config: true, serving: !opts.draining() };
    if (config.readiness.upstream) checks.upstream = upstreamReachable;
    if (config.store.failReadiness) checks.store = reachable;
    const store = {
      kind: opts.store.kind,
      reachable,
      fallbackActive: opts.store.fallbackActive(),
      onError: config.store.onError,
    };
    return {
      ready: Object.values(checks).every(Boolean),
      checks,
      details: { upstream: { reachable: upstreamReachable }, store },
    };
  };
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

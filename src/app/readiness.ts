/** @module Readiness of a single process: what /readyz checks (config, serving; the upstream and the store only when asked). */
import net from 'node:net';
import type { StoreHandle } from '../limiter/factory.js';
import type { Metrics } from '../observability/metrics.js';
import type { RequestPolicy } from '../pipeline/policy.js';

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
 * whatever the rate of probes and scrapes; they are also the ones the metrics read.
 */
export function createReadiness(opts: {
  origin: string;
  store: StoreHandle;
  metrics: Metrics;
  policy: () => RequestPolicy;
  draining: () => boolean;
}): () => Promise<ReadinessReport> {
  const upstreamProbe = cachedProbe(opts.origin);
  const storeProbe = cached(() => opts.store.reachable());
  opts.metrics.storeProbe = storeProbe;
  opts.metrics.upstreamProbe = upstreamProbe;
  return async () => {
    const [reachable, upstreamReachable] = await Promise.all([storeProbe(), upstreamProbe()]);
    const config = opts.policy().snapshot.config;
    const checks: Record<string, boolean> = { config: true, serving: !opts.draining() };
    if (config.readiness.upstream) checks.upstream = upstreamReachable;
    if (config.store.failReadiness) checks.store = reachable;
    const store = { kind: opts.store.kind, reachable, fallbackActive: opts.store.fallbackActive(), onError: config.store.onError };
    return { ready: Object.values(checks).every(Boolean), checks, details: { upstream: { reachable: upstreamReachable }, store } };
  };
}

/** Is the upstream accepting TCP connections? Checked at most once a second, whatever the probe rate. */
function cachedProbe(origin: string): () => Promise<boolean> {
  const u = new URL(origin);
  const port = Number(u.port || (u.protocol === 'https:' ? 443 : 80));
  const host = u.hostname.replace(/^\[|\]$/g, '');
  return cached(
    () =>
      new Promise<boolean>((resolve) => {
        const s = net.connect({ host, port, timeout: 1000 });
        s.once('connect', () => (s.destroy(), resolve(true)));
        s.once('error', () => resolve(false));
        s.once('timeout', () => (s.destroy(), resolve(false)));
      }),
  );
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

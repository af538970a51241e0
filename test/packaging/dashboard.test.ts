/** @module The Grafana dashboard: it parses, uses the datasource variable, and queries only metrics that exist. */
import client from 'prom-client';
import { describe, expect, it } from 'vitest';
import { GuardMetrics } from '../../src/guard/metrics.js';
import { Metrics } from '../../src/observability/metrics.js';
import { read } from './support.js';

interface Target {
  expr: string;
  datasource?: { uid?: string };
}
interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { x: number; y: number; w: number; h: number };
  datasource?: { uid?: string };
  targets?: Target[];
}
interface Dashboard {
  uid: string;
  title: string;
  panels: Panel[];
  templating: { list: { name: string; type: string; query: unknown; definition?: string }[] };
}

const dashboard = JSON.parse(read('helm/rategate/dashboards/rategate.json')) as Dashboard;
const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
const variableQueries = dashboard.templating.list.map((v) => v.definition ?? '');

/** Metric names the gateway registers (src/observability/metrics.ts), read from a live registry. */
const defined = (() => {
  const metrics = new Metrics({ collectDefault: false });
  // The attack-day metrics (src/guard/metrics.ts) register on the same registry.
  new GuardMetrics(
    metrics.registry,
    () => null,
    () => [],
  );
  return new Set(metrics.registry.getMetricsAsArray().map((m) => m.name));
})();

/** Names a PromQL expression selects: identifiers followed by `{`, `[` or `)` that are not functions or labels. */
function metricsIn(expr: string): string[] {
  const withoutLabels = expr.replace(/\{[^}]*\}/g, '{}').replace(/by \([^)]*\)/g, '');
  return [...withoutLabels.matchAll(/\b([a-z_][a-z0-9_]*)\s*(?=\{|\[|\))/g)]
    .map((m) => m[1] ?? '')
    .filter((name) => name.includes('_') && !name.startsWith('__'));
}

/** A histogram is queried through its _bucket / _sum / _count series. */
function baseName(name: string): string {
  const base = name.replace(/_(bucket|sum|count)$/, '');
  return defined.has(base) ? base : name;
}

describe('the Grafana dashboard', () => {
  it('is a dashboard with uniquely numbered, placed panels that all have queries', () => {
    expect(dashboard.uid).toBe('rategate');
    expect(dashboard.panels.length).toBeGreaterThanOrEqual(9);
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const p of dashboard.panels) {
      expect(p.gridPos.w, p.title).toBeGreaterThan(0);
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
    }
  });

  it('reads every panel and query from the ${datasource} variable', () => {
    const ds = dashboard.templating.list.find((v) => v.name === 'datasource');
    expect(ds).toMatchObject({ type: 'datasource', query: 'prometheus' });
    for (const p of dashboard.panels) {
      expect(p.datasource?.uid, p.title).toBe('${datasource}');
      for (const t of p.targets ?? []) expect(t.datasource?.uid, p.title).toBe('${datasource}');
    }
  });

  it('queries only rategate metrics defined in src/observability/metrics.ts', () => {
    expect(defined.size).toBeGreaterThanOrEqual(8);
    const queried = [...exprs, ...variableQueries].flatMap(metricsIn).filter((n) => n.startsWith('rategate_'));
    expect(queried.length).toBeGreaterThan(0);
    for (const name of queried) expect(defined.has(baseName(name)), name).toBe(true);
  });

  it('queries only Node process metrics that prom-client actually exports', async () => {
    const registry = new client.Registry();
    client.collectDefaultMetrics({ register: registry });
    const defaults = new Set((await registry.getMetricsAsJSON()).map((m) => m.name));
    const others = exprs.flatMap(metricsIn).filter((n) => !n.startsWith('rategate_'));
    for (const name of others)
      expect(defaults.has(name.replace(/_(bucket|sum|count)$/, '')) || defaults.has(name), name).toBe(true);
  });

  it('charts every metric the operations section of the spec names', () => {
    const all = exprs.join('\n');
    for (const name of [
      'rategate_requests_total',
      'rategate_near_limit_total',
      'rategate_store_duration_seconds_bucket',
      'rategate_store_errors_total',
      'rategate_store_fallback_active',
      'rategate_upstream_duration_seconds_bucket',
      'rategate_upstream_errors_total',
      'rategate_config_reloads_total',
    ]) {
      expect(all, name).toContain(name);
    }
    expect(all).toMatch(/histogram_quantile\(0\.5, sum by \(le\) \(rate\(rategate_store_duration_seconds_bucket/);
    expect(all).toMatch(/histogram_quantile\(0\.99, sum by \(le\) \(rate\(rategate_store_duration_seconds_bucket/);
    expect(all).toMatch(/sum by \(le, status_class\) \(rate\(rategate_upstream_duration_seconds_bucket/);
    expect(all).toMatch(/sum by \(rule, decision\) \(rate\(rategate_requests_total/);
    expect(all).toMatch(/decision="limited"/);
  });

  it('groups only by labels the metrics carry, never by an IP, token or account', () => {
    const groupings = exprs.flatMap((e) => [...e.matchAll(/by \(([^)]*)\)/g)].map((m) => m[1] ?? ''));
    const labels = new Set(groupings.flatMap((g) => g.split(',').map((l) => l.trim())));
    for (const label of labels)
      expect([
        'rule',
        'decision',
        'reason',
        'result',
        'status_class',
        'code',
        'code_class',
        'le',
        'instance',
        'version',
        'ban',
        'source',
      ]).toContain(label);
  });

  it('charts the RED view: responses by code class, their error share, end-to-end latency quantiles and the latency SLO', () => {
    const red = dashboard.panels.filter((p) => p.title.startsWith('RED: ') || p.title.startsWith('Latency SLO'));
    const redExprs = red.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
    expect(redExprs.some((e) => /sum by \(code_class\) \(rate\(rategate_http_responses_total\{/.test(e))).toBe(true);
    expect(redExprs.some((e) => /code_class="5xx"/.test(e))).toBe(true);
    expect(
      redExprs.some((e) =>
        /histogram_quantile\(0\.99, sum by \(le\) \(rate\(rategate_http_request_duration_seconds_bucket\{/.test(e),
      ),
    ).toBe(true);
    // The SLO stat reads the alert's own bucket (le="1", RategateLatencySLOBurn).
    expect(redExprs.some((e) => /rategate_http_request_duration_seconds_bucket\{le="1"/.test(e))).toBe(true);
  });

  it('opens with a summary row: requests/s, 429/s, store up, version, reload state', () => {
    const top = dashboard.panels.filter((p) => p.gridPos.y === 0).sort((a, b) => a.gridPos.x - b.gridPos.x);
    expect(top.map((p) => p.title)).toEqual(['Requests/s', '429/s', 'Store up', 'Version', 'Last reload']);
    for (const p of top) expect(p.type).toBe('stat');
    const expr = (i: number): string => top[i]!.targets![0]!.expr;
    expect(expr(0)).toMatch(
      /rate\(rategate_upstream_duration_seconds_count.*\+ sum\(rate\(rategate_gateway_responses_total/,
    );
    expect(expr(1)).toMatch(/rategate_gateway_responses_total\{[^}]*code="429"/);
    expect(expr(2)).toMatch(/^min\(rategate_store_up\{/);
    expect(expr(3)).toMatch(/^count by \(version\) \(rategate_build_info\{/);
    expect(expr(4)).toMatch(/^min\(rategate_config_last_reload_successful\{/);
    // The row spans the width and sits above everything else.
    expect(top.reduce((w, p) => w + p.gridPos.w, 0)).toBe(24);
    for (const p of dashboard.panels.filter((q) => !top.includes(q))) expect(p.gridPos.y).toBeGreaterThanOrEqual(4);
  });
});

/**
 * The shipped alert rules (helm/rategate/alerts/rategate.rules.yaml): promtool's unit tests, every alert
 * documented, and a real Prometheus scraping real gateways that sees the alerts go pending.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { startTestGateway, SEED_TABLE, type TestGateway } from '../support/gateway.js';
import { freePort } from '../support/servers.js';
import { eventually } from '../support/eventually.js';
import { scaledMs } from '../support/speed.js';

const RULES = 'helm/rategate/alerts/rategate.rules.yaml';
const has = (bin: string): boolean => spawnSync(bin, ['--version'], { stdio: 'ignore' }).status === 0;
const missing = [has('promtool') ? null : 'promtool', has('prometheus') ? null : 'prometheus'].filter(
  (x) => x !== null,
);
if (missing.length > 0) {
  // CI installs Debian's prometheus package (.ci/run): there, a missing binary is a failure, not a skip.
  if (process.env.CI) throw new Error(`${missing.join(' and ')} not found: install Debian's prometheus package`);
  console.warn(`SKIPPING alert rule tests: ${missing.join(' and ')} not found (apt-get install prometheus)`);
}

interface Rule {
  alert: string;
  expr: string;
  annotations: Record<string, string>;
}
const rules = (parse(readFileSync(RULES, 'utf8')) as { groups: Array<{ rules: Rule[] }> }).groups.flatMap(
  (g) => g.rules,
);

describe('the alert rules file', () => {
  it('holds the alerts operators need, each with a summary, a description and a runbook that exists', () => {
    expect(rules.map((r) => r.alert)).toEqual(
      expect.arrayContaining([
        'RategateConfigReloadFailed',
        'RategateStoreDegraded',
        'RategateStoreTimeouts',
        'RategateUpstreamDown',
        'RategateUpstreamErrors',
        'RategateHighRejectionRatio',
        'RategateStoreSlow',
        'RategateBanWave',
        'RategateRuntimeBlocksInForce',
        'RategateSurgeActive',
        'RategateTlsCertificateExpiring',
        'RategateDown',
        'RategateAbsent',
        'RategateKeyTableFull',
        'RategateGatewayErrors',
        'RategateEventLoopLag',
        'RategateLatencySLOBurn',
      ]),
    );
    const readme = readFileSync('README.md', 'utf8');
    for (const r of rules) {
      expect(r.annotations.summary, r.alert).toBeTruthy();
      expect(r.annotations.description, r.alert).toBeTruthy();
      // The convention's key, an absolute URL (Alertmanager and Grafana link it as is).
      expect(r.annotations.runbook, r.alert).toBeUndefined();
      expect(r.annotations.runbook_url, r.alert).toBe(
        `https://github.com/rategate/rategate/blob/main/README.md#${r.alert.toLowerCase()}`,
      );
      expect(readme, `README heading for ${r.alert}`).toMatch(new RegExp(`^#### ${r.alert}$`, 'm'));
    }
  });

  it.skipIf(missing.length > 0)(
    'passes promtool check and its unit tests (fires on a broken reload, a dead store, a sustained error rate, a gateway down or absent; never on a healthy gateway nor on one store timeout)',
    () => {
      const check = spawnSync('promtool', ['check', 'rules', RULES], { encoding: 'utf8' });
      expect(check.status, check.stdout + check.stderr).toBe(0);
      const test = spawnSync('promtool', ['test', 'rules', 'test/ops/alerts/rategate.rules.test.yaml'], {
        encoding: 'utf8',
      });
      expect(test.status, test.stdout + test.stderr).toBe(0);
    },
  );
});

describe.skipIf(missing.length > 0)('a real Prometheus with the shipped rules', () => {
  let upstream: RecordingUpstream | undefined;
  let healthy: TestGateway | undefined;
  let broken: TestGateway | undefined;
  let prometheus: ChildProcess | undefined;
  afterAll(async () => {
    prometheus?.kill('SIGTERM');
    await healthy?.shutdown(500);
    await broken?.shutdown(500);
    await upstream?.close();
  });

  type Alert = { labels: Record<string, string>; state: string };
  async function alerts(base: string): Promise<Alert[]> {
    const r = (await (await fetch(`${base}/api/v1/alerts`)).json()) as { data: { alerts: Alert[] } };
    return r.data.alerts;
  }
  /** A probe's first defined answer (Prometheus evaluates every second: asked every 200 ms). */
  const until = <T>(what: string, withinMs: number, probe: () => Promise<T | undefined>): Promise<T> =>
    eventually(probe, { what, withinMs, everyMs: 200, until: (v) => v !== undefined }) as Promise<T>;

  it(
    'shows nothing for a healthy gateway, ReloadFailed after one broken edit, StoreDegraded with Redis down',
    async () => {
      upstream = await startRecordingUpstream();
      healthy = await startTestGateway(SEED_TABLE, { upstream: upstream.url });
      broken = await startTestGateway(`store: { onError: local }\n${SEED_TABLE}`, {
        upstream: upstream.url,
        store: 'redis://127.0.0.1:9',
      });
      const target = (gw: TestGateway) => new URL(gw.adminUrl).host;
      const healthyAt = target(healthy);
      const brokenAt = target(broken);

      const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-prom-'));
      writeFileSync(
        path.join(dir, 'prometheus.yml'),
        [
          'global: { scrape_interval: 1s, evaluation_interval: 1s }',
          `rule_files: [${JSON.stringify(path.resolve(RULES))}]`,
          'scrape_configs:',
          `  - { job_name: rategate, static_configs: [{ targets: [${JSON.stringify(healthyAt)}, ${JSON.stringify(brokenAt)}] }] }`,
          '',
        ].join('\n'),
      );
      const port = await freePort();
      const base = `http://127.0.0.1:${port}`;
      prometheus = spawn(
        'prometheus',
        [
          `--config.file=${path.join(dir, 'prometheus.yml')}`,
          `--storage.tsdb.path=${path.join(dir, 'data')}`,
          `--web.listen-address=127.0.0.1:${port}`,
        ],
        { stdio: 'ignore' },
      );

      // Both targets scraped, and the rules evaluated after that.
      await until('both targets up', 20_000, async () => {
        const r = (await (await fetch(`${base}/api/v1/query?query=sum(up)`)).json()) as {
          data: { result: Array<{ value: [number, string] }> };
        };
        return r.data.result[0]?.value[1] === '2' ? true : undefined;
      });
      const degraded = await until('RategateStoreDegraded pending for the gateway without Redis', 10_000, async () =>
        (await alerts(base)).find((a) => a.labels.alertname === 'RategateStoreDegraded'),
      );
      expect(degraded).toMatchObject({ state: 'pending', labels: { instance: brokenAt } });
      expect((await alerts(base)).filter((a) => a.labels.instance === healthyAt)).toEqual([]);

      writeFileSync(healthy.configPath, 'limits:\n  - { name: broken, match: nope, per: ip, limit: -1, period: 5x }\n');
      expect(await healthy.reload()).toBe(false);
      const failed = await until('RategateConfigReloadFailed pending after the broken edit', 10_000, async () =>
        (await alerts(base)).find((a) => a.labels.alertname === 'RategateConfigReloadFailed'),
      );
      expect(failed).toMatchObject({ state: 'pending', labels: { instance: healthyAt, severity: 'warning' } });
    },
    scaledMs(60_000),
  );
});

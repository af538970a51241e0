/**
 * @module The Helm chart's static parts: Chart.yaml, values.yaml against values.schema.json (with ajv, as
 * Helm validates values with a JSON Schema validator), the schema's generated parts against the zod
 * schema, template references, and the README. Rendering is in chart-render.test.ts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { CHART_SCHEMA_PATH, renderChartSchema } from '../../scripts/gen-schema.js';
import { ruleShape, topShape } from '../../src/config/schema.js';
import { CHART, hasPath, read, valuesPaths } from './support.js';

const chartFile = (name: string): string => read(`helm/rategate/${name}`);
const chart = parseYaml(chartFile('Chart.yaml')) as Record<string, unknown>;

type Values = Record<string, any>;
const schema = JSON.parse(chartFile('values.schema.json')) as Values;
/** values.yaml plus the one value an operator must write in ingress mode (deploy-guards.test.ts). */
const loadValues = (): Values => ({
  ...(parseYaml(chartFile('values.yaml')) as Values),
  upstream: { url: 'http://mastodon-web.social.svc:3000' },
});
const values = loadValues();
const checkValues = new Ajv({
  allErrors: true,
  strictSchema: true,
  strictTypes: false,
  strictRequired: false,
  allowUnionTypes: true,
}).compile(schema);
/** ajv's errors as `/path: message` (empty when valid). */
function violations(v: unknown): string[] {
  return checkValues(v)
    ? []
    : (checkValues.errors ?? []).map(
        (e) =>
          `${e.instancePath || '/'}: ${e.message ?? ''}${e.params && 'additionalProperty' in e.params ? ` (${String(e.params.additionalProperty)})` : ''}`,
      );
}
const templateFiles = (dir = 'templates'): string[] =>
  readdirSync(`${CHART}${dir}`, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? templateFiles(`${dir}/${e.name}`) : [`${dir}/${e.name}`],
  );

describe('Chart.yaml', () => {
  it('is an apiVersion v2 application chart whose appVersion is the package version', () => {
    const pkg = JSON.parse(read('package.json')) as { version: string };
    expect(chart.apiVersion).toBe('v2');
    expect(chart.name).toBe('rategate');
    expect(chart.type).toBe('application');
    expect(String(chart.version)).toMatch(/^\d+\.\d+\.\d+/);
    expect(chart.appVersion).toBe(pkg.version);
  });
});

describe('values.yaml and values.schema.json', () => {
  it('is a draft-07 schema that closes its objects', () => {
    expect(schema.$schema).toBe('http://json-schema.org/draft-07/schema#');
    expect(schema.additionalProperties).toBe(false);
  });

  it('validates the shipped values with an upstream (refused without one: deploy-guards.test.ts)', () => {
    expect(violations(values)).toEqual([]);
  });

  it('declares every key of values.yaml in the schema', () => {
    const undeclared: string[] = [];
    const walk = (node: unknown, s: Values, path: string): void => {
      const target = typeof s.$ref === 'string' ? (schema.definitions[s.$ref.split('/').pop() ?? ''] ?? s) : s;
      const props = target.properties as Record<string, Values> | undefined;
      if (props === undefined || node === null || typeof node !== 'object' || Array.isArray(node)) return;
      for (const [key, child] of Object.entries(node)) {
        const sub = props[key];
        if (sub === undefined) undeclared.push(`${path}${key}`);
        else walk(child, sub, `${path}${key}.`);
      }
    };
    walk(values, schema, '');
    expect(undeclared).toEqual([]);
  });

  it.each([
    ['replicaCount', 'two'],
    ['replicaCount', '3'],
    ['mode', 'gateway'],
    ['gateway.port', '8080'],
    ['service.port', 70000],
    ['service.type', 'External'],
    ['store.url', 'mysql://db:3306'],
    ['upstream.url', 'api.internal:3000'],
    ['securityContext', 'hardened'],
    ['autoscaling.enabled', 'yes'],
    ['limits', { name: 'not-a-list' }],
    ['podDisruptionBudget.maxUnavailable', 'half'],
    ['terminationGracePeriodSeconds', 0],
    ['terminationGracePeriodSeconds', '30'],
    ['admin.token', 42],
    ['ingress.hosts', [{ host: 'a.example', paths: [{ path: 'no-slash' }] }]],
    ['networkPolicy.admin.namespaces', 'monitoring'],
  ])('rejects a copy of the values with %s set to %j', (path, bad) => {
    const copy = loadValues();
    const keys = path.split('.');
    let node = copy;
    for (const key of keys.slice(0, -1)) node = node[key] as Values;
    node[keys[keys.length - 1] ?? ''] = bad;
    expect(violations(copy).length).toBeGreaterThan(0);
  });

  it('rejects an unknown key and a limit rule with a wrong type, a misspelled field or an unknown algorithm', () => {
    expect(violations({ ...loadValues(), replicas: 3 })).toContainEqual(expect.stringContaining('(replicas)'));
    const wrongType = loadValues();
    wrongType.limits[0].limit = '300';
    expect(violations(wrongType)).toContainEqual(expect.stringMatching(/^\/limits\/0\/limit: must be integer/));
    const misspelled = loadValues();
    misspelled.limits[1].perios = '5m';
    expect(violations(misspelled)).toContainEqual(expect.stringContaining('(perios)'));
    const leaky = loadValues();
    leaky.limits[0].algorithm = 'leaky';
    expect(violations(leaky)).toContainEqual(
      expect.stringMatching(/^\/limits\/0\/algorithm: must be equal to one of the allowed values/),
    );
  });

  it('requires an application image in sidecar mode only', () => {
    const sidecar = loadValues();
    sidecar.mode = 'sidecar';
    expect(violations(sidecar)).toContainEqual(
      expect.stringMatching(/^\/app\/image\/repository: must NOT have fewer than 1 characters/),
    );
    sidecar.app.image.repository = 'ghcr.io/example/api';
    expect(violations(sidecar)).toEqual([]);
  });

  it('accepts a rule with every key limits.yaml accepts, and config.server', () => {
    const rule = {
      name: 'everything',
      match: ['POST /api/v1/media'],
      per: 'account',
      limit: 10,
      period: '1m',
      algorithm: 'token-bucket',
      cost: 2,
      shadow: true,
      onStoreError: 'deny',
    };
    const server = {
      maxHeaderSize: 32768,
      headersTimeout: '10s',
      requestTimeout: 0,
      keepAliveTimeout: '65s',
      maxConnections: 5000,
      maxBodySize: '40MB',
      bodyLimits: [{ match: 'POST /api/v2/media', maxBodySize: '100MB' }],
    };
    expect(violations({ ...loadValues(), limits: [rule], config: { server } })).toEqual([]);
    // Every key the gateway's schema knows, including keys added after this test was written.
    expect(Object.keys(schema.definitions.rule.properties).sort()).toEqual(Object.keys(ruleShape).sort());
  });

  it('accepts in config every key limits.yaml accepts, each section with its own keys', () => {
    expect(Object.keys(schema.properties.config.properties).sort()).toEqual(Object.keys(topShape).sort());
    const config = {
      store: { prefix: 'edge', timeout: '25ms', onError: 'allow' },
      upstream: { timeout: '10s' },
      clients: { trustedProxies: ['10.0.0.0/8'], account: { from: 'token' } },
      responses: { reset: 'unix' },
      exempt: { ips: ['10.1.2.3'] },
      log: { level: 'warn' },
    };
    expect(violations({ ...loadValues(), config })).toEqual([]);
    expect(violations({ ...loadValues(), config: { store: { prefixx: 'edge' } } })).toContainEqual(
      expect.stringContaining('(prefixx)'),
    );
    expect(violations({ ...loadValues(), config: { store: { onError: 'explode' } } })).not.toEqual([]);
  });

  it('generates its rule and config parts from the zod schema (run `npm run schema` after changing it)', () => {
    expect(readFileSync(CHART_SCHEMA_PATH, 'utf8')).toBe(renderChartSchema(readFileSync(CHART_SCHEMA_PATH, 'utf8')));
  });

  it('notices a hand edit of a generated part', () => {
    const edited = structuredClone(schema);
    edited.definitions.rule.properties.algorithm.enum.push('leaky');
    const text = `${JSON.stringify(edited, null, 2)}\n`;
    expect(renderChartSchema(text)).not.toBe(text);
  });

  it('ships the seed limit table, the same as config/limits.yaml, with media uploads of v1 and v2 in one bucket', () => {
    const shipped = parseYaml(read('config/limits.yaml')) as { limits: { name: string; match: unknown }[] };
    expect(values.limits).toEqual(shipped.limits);
    expect(shipped.limits.find((r) => r.name === 'uploading')?.match).toEqual([
      'POST /api/v1/media',
      'POST /api/v2/media',
    ]);
  });

  it('defaults to hardened security contexts, no token, and every optional resource off', () => {
    expect(values.securityContext).toMatchObject({
      runAsNonRoot: true,
      runAsUser: 10001,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(values.podSecurityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(values.admin).toEqual({ token: '', existingSecret: '', existingSecretKey: 'token' });
    for (const flag of [
      'autoscaling',
      'podDisruptionBudget',
      'serviceMonitor',
      'prometheusRule',
      'networkPolicy',
      'ingress',
      'helmTest',
      'dashboards',
    ]) {
      expect(values[flag].enabled, flag).toBe(false);
    }
  });

  it('warns next to the values that the memory store counts per replica', () => {
    const text = chartFile('values.yaml');
    const at = text.indexOf('replicaCount:');
    expect(text.slice(Math.max(0, at - 400), at)).toMatch(/memory[\s\S]*per replica[\s\S]*Redis/i);
  });
});

describe('the templates', () => {
  it.each(templateFiles())('%s references only .Values paths that exist in values.yaml', (name) => {
    // Under missingkey=zero a misspelt path renders as empty instead of failing: check them statically.
    const missing = valuesPaths(chartFile(name)).filter((p) => !hasPath(values, p));
    expect(missing).toEqual([]);
  });

  it('ship the alerts file the PrometheusRule carries, with the alerts SPEC §6 names', () => {
    const rules = parseYaml(chartFile('alerts/rategate.rules.yaml')) as { groups: { rules: { alert?: string }[] }[] };
    const alerts = rules.groups.flatMap((g) => g.rules.map((r) => r.alert));
    expect(alerts).toEqual(expect.arrayContaining(['RategateConfigReloadFailed', 'RategateStoreDegraded']));
  });
});

describe('the chart README', () => {
  const readme = chartFile('README.md');

  it('documents both modes, hot reload, restarts, Redis for replicas, and every top-level value', () => {
    expect(readme).toMatch(/helm install [\s\S]*?--set upstream\.url=/);
    expect(readme).toMatch(/helm install [\s\S]*?--set mode=sidecar/);
    expect(readme).toMatch(/hot-reloaded/);
    expect(readme).toMatch(/rollout restart/);
    expect(readme).toMatch(/counts \*\*per replica\*\*/);
    const table = readme.slice(readme.indexOf('## Values'));
    for (const key of Object.keys(values)) expect(table, key).toContain(`\`${key}`);
  });

  it('documents every optional resource, the image to build and push, and the sidecar recipe', () => {
    for (const flag of ['prometheusRule.enabled', 'networkPolicy.enabled', 'ingress.enabled', 'helmTest.enabled'])
      expect(readme, flag).toContain(flag);
    expect(readme).toMatch(/docker build[\s\S]*docker push[\s\S]*image\.repository/);
    expect(readme).toMatch(/examples\/mastodon-sidecar/);
  });
});

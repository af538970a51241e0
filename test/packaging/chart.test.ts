/**
 * @module The Helm chart, linted without rendering (there is no helm binary here): Chart.yaml, values
 * against values.schema.json, template structure and references, and the Kubernetes fields that matter.
 */
import { readdirSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../src/config/index.js';
import { CHART, hasPath, lintTemplate, read, validate, valuesPaths, type Schema } from './support.js';

const chartFile = (name: string): string => read(`helm/rategate/${name}`);
const chart = parseYaml(chartFile('Chart.yaml')) as Record<string, unknown>;
const schema = JSON.parse(chartFile('values.schema.json')) as Schema;
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed YAML whose shape the schema tests check
type Values = Record<string, any>;
const loadValues = (): Values => parseYaml(chartFile('values.yaml')) as Values;
const values = loadValues();
const templateNames = readdirSync(`${CHART}templates`).sort();
const templates = new Map(templateNames.map((name) => [name, chartFile(`templates/${name}`)]));
const template = (name: string): string => {
  const text = templates.get(name);
  if (text === undefined) throw new Error(`templates/${name} is missing`);
  return text;
};

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

  it('validates the shipped values', () => {
    expect(validate(schema, values)).toEqual([]);
  });

  it('declares every key of values.yaml in the schema', () => {
    const undeclared: string[] = [];
    const walk = (node: unknown, s: Schema, path: string): void => {
      const target = typeof s.$ref === 'string' ? ((schema.definitions as Record<string, Schema>)[s.$ref.split('/').pop() ?? ''] ?? s) : s;
      const props = target.properties as Record<string, Schema> | undefined;
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
    ['mode', 'gateway'],
    ['gateway.port', '8080'],
    ['service.port', 70000],
    ['store.url', 'mysql://db:3306'],
    ['upstream.url', 'api.internal:3000'],
    ['securityContext', 'hardened'],
    ['autoscaling.enabled', 'yes'],
    ['limits', { name: 'not-a-list' }],
    ['podDisruptionBudget.maxUnavailable', 'half'],
    ['terminationGracePeriodSeconds', 5],
  ])('rejects a copy of the values with %s set to %j', (path, bad) => {
    const copy = loadValues();
    const keys = path.split('.');
    let node = copy;
    for (const key of keys.slice(0, -1)) node = node[key] as Values;
    node[keys[keys.length - 1] ?? ''] = bad;
    expect(validate(schema, copy).length).toBeGreaterThan(0);
  });

  it('rejects an unknown key and a limit rule with a wrong type or a misspelled field', () => {
    expect(validate(schema, { ...loadValues(), replicas: 3 })).toContainEqual(expect.stringContaining('$.replicas: not allowed'));
    const wrongType = loadValues();
    wrongType.limits[0].limit = '300';
    expect(validate(schema, wrongType)).toContainEqual(expect.stringContaining('$.limits[0].limit: expected integer'));
    const misspelled = loadValues();
    misspelled.limits[1].perios = '5m';
    expect(validate(schema, misspelled)).toContainEqual(expect.stringContaining('$.limits[1].perios: not allowed'));
  });

  it('requires an application image in sidecar mode only', () => {
    const sidecar = loadValues();
    sidecar.mode = 'sidecar';
    expect(validate(schema, sidecar)).toContainEqual(expect.stringContaining('$.app.image.repository: shorter than 1'));
    sidecar.app.image.repository = 'ghcr.io/example/api';
    expect(validate(schema, sidecar)).toEqual([]);
  });

  it('ships the seed limit table, the same as config/limits.yaml', () => {
    const shipped = parseYaml(read('config/limits.yaml')) as { limits: unknown };
    expect(values.limits).toEqual(shipped.limits);
  });

  it('renders a limits.yaml the gateway accepts, with the settings the Deployment passes in both modes', () => {
    const doc = { ...(values.config as object), limits: values.limits };
    const common = { listen: `0.0.0.0:${values.gateway.port}`, adminListen: `0.0.0.0:${values.gateway.adminPort}`, store: values.store.url };
    const ingress = validateConfig(doc, { ...common, upstream: values.upstream.url });
    expect(ingress.ok ? [] : ingress.errors).toEqual([]);
    const sidecar = validateConfig(doc, { ...common, upstream: `http://127.0.0.1:${values.app.port}` });
    expect(sidecar.ok ? [] : sidecar.errors).toEqual([]);
  });

  it('defaults to hardened security contexts', () => {
    const sc = values.securityContext;
    expect(sc).toMatchObject({
      runAsNonRoot: true,
      runAsUser: 10001,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(values.podSecurityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(values.resources.requests).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
    expect(values.resources.limits).toMatchObject({ memory: expect.any(String) });
  });

  it('warns next to the values that the memory store counts per replica', () => {
    const text = chartFile('values.yaml');
    const at = text.indexOf('replicaCount:');
    expect(text.slice(Math.max(0, at - 400), at)).toMatch(/memory[\s\S]*per replica[\s\S]*Redis/i);
    expect(template('NOTES.txt')).toMatch(/WARNING: store\.url is "memory"/);
  });
});

describe('the chart README', () => {
  it('documents both modes, hot reload, Redis for replicas, and every top-level value', () => {
    const readme = chartFile('README.md');
    expect(readme).toMatch(/helm install [\s\S]*?--set upstream\.url=/);
    expect(readme).toMatch(/helm install [\s\S]*?--set mode=sidecar/);
    expect(readme).toMatch(/hot-reloaded/);
    expect(readme).toMatch(/counts \*\*per replica\*\*/);
    const table = readme.slice(readme.indexOf('## Values'));
    for (const key of Object.keys(values)) expect(table, key).toContain(`\`${key}`);
  });
});

describe('the templates', () => {
  it('include every resource of the chart', () => {
    expect(templateNames).toEqual(
      expect.arrayContaining([
        '_helpers.tpl',
        'deployment.yaml',
        'configmap.yaml',
        'service.yaml',
        'servicemonitor.yaml',
        'hpa.yaml',
        'pdb.yaml',
        'serviceaccount.yaml',
        'dashboard-configmap.yaml',
        'NOTES.txt',
      ]),
    );
  });

  it.each(templateNames)('%s balances its {{ }} delimiters and its if/with/range/define blocks', (name) => {
    expect(lintTemplate(template(name)).problems).toEqual([]);
  });

  it('notices an unbalanced delimiter or an unclosed block', () => {
    expect(lintTemplate('a: {{ .Values.x }\n').problems).not.toEqual([]);
    expect(lintTemplate('{{- if .Values.x }}\na: 1\n').problems).toEqual(['line 1: "if" is never closed with "end"']);
    expect(lintTemplate('{{ end }}').problems).not.toEqual([]);
  });

  it.each(templateNames)('%s references only .Values paths that exist in values.yaml', (name) => {
    const missing = valuesPaths(template(name)).filter((p) => !hasPath(values, p));
    expect(missing).toEqual([]);
  });

  it('use only named templates that _helpers.tpl defines', () => {
    const defined = new Set([...template('_helpers.tpl').matchAll(/\{\{-?\s*define\s+"([^"]+)"/g)].map((m) => m[1]));
    expect(defined).toEqual(
      new Set(['rategate.name', 'rategate.fullname', 'rategate.chart', 'rategate.labels', 'rategate.selectorLabels', 'rategate.serviceAccountName', 'rategate.image', 'rategate.upstream', 'rategate.configDir']),
    );
    for (const [name, text] of templates) {
      for (const m of text.matchAll(/\b(?:include|template)\s+"([^"]+)"/g)) expect(defined.has(m[1]), `${name}: ${m[1]}`).toBe(true);
    }
  });

  it('put the optional resources behind their flags', () => {
    expect(template('servicemonitor.yaml')).toMatch(/^\{\{- if \.Values\.serviceMonitor\.enabled \}\}/);
    expect(template('servicemonitor.yaml')).toContain('kind: ServiceMonitor');
    expect(template('hpa.yaml')).toMatch(/^\{\{- if \.Values\.autoscaling\.enabled \}\}/);
    expect(template('hpa.yaml')).toContain('apiVersion: autoscaling/v2');
    expect(template('pdb.yaml')).toMatch(/^\{\{- if \.Values\.podDisruptionBudget\.enabled \}\}/);
    expect(template('pdb.yaml')).toContain('apiVersion: policy/v1');
    expect(template('serviceaccount.yaml')).toMatch(/^\{\{- if \.Values\.serviceAccount\.create \}\}/);
    expect(template('dashboard-configmap.yaml')).toMatch(/^\{\{- if \.Values\.dashboards\.enabled \}\}/);
    expect(values.dashboards.labels).toEqual({ grafana_dashboard: '1' });
    expect(template('dashboard-configmap.yaml')).toContain('.Files.Get "dashboards/rategate.json"');
  });

  it('omit replicas from the Deployment when the HPA owns them', () => {
    expect(template('deployment.yaml')).toMatch(/\{\{- if not \.Values\.autoscaling\.enabled \}\}\s*replicas: \{\{ \.Values\.replicaCount \}\}/);
  });
});

describe('the Deployment', () => {
  const deployment = template('deployment.yaml');

  it('probes liveness on /healthz and readiness on /readyz of the named admin port', () => {
    expect(deployment).toMatch(/livenessProbe:\s*httpGet:\s*path: \/healthz\s*port: admin\b/);
    expect(deployment).toMatch(/readinessProbe:\s*httpGet:\s*path: \/readyz\s*port: admin\b/);
    expect(deployment).toMatch(/- name: http\s*containerPort: \{\{ \.Values\.gateway\.port \}\}/);
    expect(deployment).toMatch(/- name: admin\s*containerPort: \{\{ \.Values\.gateway\.adminPort \}\}/);
    // Probes must reach the admin listener, which defaults to loopback.
    expect(deployment).toMatch(/- name: RATEGATE_ADMIN_LISTEN\s*value: "0\.0\.0\.0:\{\{ \.Values\.gateway\.adminPort \}\}"/);
  });

  it('applies the pod and container security contexts', () => {
    expect(deployment).toMatch(/securityContext:\s*\{\{- toYaml \.Values\.podSecurityContext \| nindent 8 \}\}/);
    expect(deployment).toMatch(/securityContext:\s*\{\{- toYaml \.Values\.securityContext \| nindent 12 \}\}/);
    expect(deployment).toMatch(/resources:\s*\{\{- toYaml \.Values\.resources \| nindent 12 \}\}/);
    // readOnlyRootFilesystem needs a writable /tmp.
    expect(deployment).toMatch(/- name: tmp\s*mountPath: \/tmp/);
  });

  it('mounts the ConfigMap as a directory, without subPath, and does not roll pods on a config change', () => {
    expect(deployment).toMatch(/- name: config\s*mountPath: \{\{ include "rategate\.configDir" \. \}\}\s*readOnly: true/);
    expect(template('_helpers.tpl')).toMatch(/define "rategate\.configDir" -\}\}\s*\/etc\/rategate\s*\{\{- end/);
    expect(deployment).toMatch(/- name: config\s*configMap:\s*name: \{\{ include "rategate\.fullname" \. \}\}/);
    expect(deployment).toMatch(/--config\s*- \{\{ include "rategate\.configDir" \. \}\}\/limits\.yaml/);
    const yamlLines = deployment.split('\n').filter((l) => !l.trim().startsWith('#'));
    expect(yamlLines.filter((l) => /subPath/.test(l))).toEqual([]);
    expect(yamlLines.filter((l) => /checksum\//.test(l))).toEqual([]);
    expect(template('configmap.yaml')).toMatch(/limits\.yaml: \|/);
    expect(template('configmap.yaml')).toContain('dict "limits" .Values.limits');
    expect(template('configmap.yaml')).toMatch(/toYaml \$doc \| nindent 4/);
  });

  it('covers both modes: the app container and a loopback upstream only in sidecar mode', () => {
    expect(deployment).toContain('{{- if eq .Values.mode "sidecar" }}');
    const sidecar = deployment.slice(deployment.lastIndexOf('{{- if eq .Values.mode "sidecar" }}'));
    expect(sidecar).toMatch(/- name: \{\{ \.Values\.app\.name \}\}/);
    expect(sidecar).toMatch(/containerPort: \{\{ \.Values\.app\.port \}\}/);
    const upstream = /define "rategate\.upstream"[\s\S]*?\{\{- end \}\}\s*\{\{- end \}\}/.exec(template('_helpers.tpl'))?.[0] ?? '';
    expect(upstream).toMatch(/if eq \.Values\.mode "sidecar"/);
    expect(upstream).toContain('printf "http://127.0.0.1:%d" (int .Values.app.port)');
    expect(upstream).toContain('.Values.upstream.url');
    expect(deployment).toMatch(/- name: RATEGATE_UPSTREAM\s*value: \{\{ include "rategate\.upstream" \. \| quote \}\}/);
    // The Service sends traffic to the gateway's port in both modes, never to the app.
    expect(template('service.yaml')).toMatch(/- name: http\s*port: \{\{ \.Values\.service\.port \}\}\s*targetPort: http\b/);
    expect(template('service.yaml')).toMatch(/- name: metrics\s*port: \{\{ \.Values\.service\.metricsPort \}\}\s*targetPort: admin\b/);
    expect(template('servicemonitor.yaml')).toMatch(/- port: metrics\s*path: \/metrics/);
  });

  it('takes the store URL from a Secret when one is named', () => {
    expect(deployment).toMatch(
      /- name: RATEGATE_STORE\s*\{\{- if \.Values\.store\.existingSecret \}\}\s*valueFrom:\s*secretKeyRef:\s*name: \{\{ \.Values\.store\.existingSecret \}\}\s*key: \{\{ \.Values\.store\.existingSecretKey \}\}\s*\{\{- else \}\}\s*value: \{\{ \.Values\.store\.url \| quote \}\}/,
    );
  });

  it('pauses before SIGTERM and grants a grace period longer than the pause plus the gateway drain', () => {
    expect(deployment).toMatch(/preStop:\s*exec:\s*command: \["sleep", "\{\{ \$preStop \}\}"\]/);
    expect(deployment).toMatch(/terminationGracePeriodSeconds: \{\{ \.Values\.terminationGracePeriodSeconds \}\}/);
    // The chart's drain figure is the gateway's own shutdown bound.
    const appDrainMs = Number(/shutdown\(graceMs = ([0-9_]+)\)/.exec(read('src/app.ts'))?.[1]?.replace(/_/g, ''));
    const chartDrain = Number(/\$drainSeconds := (\d+)/.exec(deployment)?.[1]);
    expect(chartDrain * 1000).toBe(appDrainMs);
    expect(values.terminationGracePeriodSeconds).toBeGreaterThan(values.lifecycle.preStopSleepSeconds + chartDrain);
    expect(deployment).toMatch(/if le \(int \.Values\.terminationGracePeriodSeconds\) \(add \$preStop \$drainSeconds\)[\s\S]*?fail/);
  });
});

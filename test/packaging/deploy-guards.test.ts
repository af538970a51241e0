/**
 * @module The chart rendered with the values an operator writes, checked for what can hurt a production
 * instance: ingress mode without an upstream, a NetworkPolicy that cuts a sidecar's app off, a table the
 * gateway would refuse reaching the pods, Mastodon's streaming service unreachable.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Ajv } from 'ajv';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { find, k8sErrors, render, rendererUnavailable, renderError, type K8sObject } from './render.js';
import { read, ROOT } from './support.js';
import { cliArgs } from '../support/process.js';

const describeRendered = describe.skipIf(rendererUnavailable !== null);
const schema = JSON.parse(read('helm/rategate/values.schema.json')) as object;
const check = new Ajv({ allErrors: true, strictTypes: false, strictRequired: false, allowUnionTypes: true }).compile(
  schema,
);
const shipped = parseYaml(read('helm/rategate/values.yaml')) as Record<string, unknown>;
/** values.yaml with the operator's values laid over (one level deep, as the tests need). */
const withValues = (o: Record<string, unknown>): Record<string, unknown> => {
  const out: Record<string, unknown> = structuredClone(shipped);
  for (const [k, v] of Object.entries(o))
    out[k] = v !== null && typeof v === 'object' && !Array.isArray(v) ? { ...(out[k] as object), ...v } : v;
  return out;
};
const schemaErrors = (o: Record<string, unknown>): string[] =>
  check(withValues(o)) ? [] : (check.errors ?? []).map((e) => `${e.instancePath}: ${e.message}`);

/** Behind an Ingress controller the chart wants to be told who sets the client's address (README: Client addresses). */
const NAMED = { clients: { trustedProxies: ['10.244.0.0/16'] } };
const SIDECAR = {
  mode: 'sidecar',
  app: { image: { repository: 'ghcr.io/mastodon/mastodon', tag: 'v4.3.0' }, port: 3000 },
  config: NAMED,
};
const MASTODON = { upstream: { url: 'http://mastodon-web.social.svc:3000' }, config: NAMED };

describe('ingress mode needs an explicit upstream', () => {
  it('is refused by values.schema.json without upstream.url; builtin written out and sidecar mode are accepted', () => {
    expect(schemaErrors({})).toContainEqual(
      expect.stringMatching(/^\/upstream\/url: must NOT have fewer than 1 characters/),
    );
    expect(schemaErrors({ upstream: { url: 'builtin' } })).toEqual([]);
    expect(schemaErrors(MASTODON)).toEqual([]);
    expect(schemaErrors(SIDECAR)).toEqual([]);
  });

  it('has an image repository a pushed image would have, the one the README builds and pushes', () => {
    const repo = (shipped.image as { repository: string }).repository;
    expect(repo).toMatch(/^[a-z0-9.-]+\.[a-z]+\/[a-z0-9._/-]+$/); // a registry host, then a path: pullable once pushed
    const readme = read('helm/rategate/README.md');
    expect(readme).toContain(`docker build -t ${repo}:`);
    expect(readme).toContain(`docker push ${repo}:`);
  });
});

describeRendered('ingress mode needs an explicit upstream (rendered)', () => {
  it('fails the render without upstream.url, and renders with it', () => {
    expect(renderError({})).toMatch(/upstream\.url is required in ingress mode/);
    expect(renderError({ upstream: { url: '' } })).toMatch(/upstream\.url is required in ingress mode/);
    expect(render(MASTODON).notes).not.toMatch(/demo API/);
    expect(render({ upstream: { url: 'builtin' } }).notes).toMatch(/demo API/);
  });
});

describeRendered('the NetworkPolicy cannot cut a sidecar app off', () => {
  it('restricts no egress in sidecar mode unless the app’s own egress is given, and NOTES says so', () => {
    const r = render({ ...SIDECAR, networkPolicy: { enabled: true } });
    const np = find(r, 'NetworkPolicy');
    expect(k8sErrors(np)).toEqual([]);
    expect(np.spec.policyTypes).toEqual(['Ingress']);
    expect(np.spec.egress).toBeUndefined();
    expect(r.notes).toMatch(/Egress: NOT restricted/);
  });

  it('with egress.app given, restricts egress to those rules plus DNS and the store', () => {
    const postgres = {
      to: [{ podSelector: { matchLabels: { app: 'postgresql' } } }],
      ports: [{ port: 5432, protocol: 'TCP' }],
    };
    const federation = { ports: [{ port: 443, protocol: 'TCP' }] };
    const r = render({
      ...SIDECAR,
      store: { url: 'redis://redis:6379' },
      networkPolicy: { enabled: true, egress: { app: [postgres, federation] } },
    });
    const np = find(r, 'NetworkPolicy');
    expect(k8sErrors(np)).toEqual([]);
    expect(np.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(np.spec.egress).toEqual(expect.arrayContaining([postgres, federation]));
    expect(np.spec.egress.flatMap((e: K8sObject) => e.ports.map((p: K8sObject) => p.port))).toEqual(
      expect.arrayContaining([53, 6379, 5432, 443]),
    );
    expect(r.notes).toMatch(/Egress: only DNS/);
  });

  it('still restricts egress in ingress mode, to every upstream’s port', () => {
    const np = find(
      render({
        ...MASTODON,
        networkPolicy: { enabled: true },
        config: {
          ...NAMED,
          upstreams: { streaming: { url: 'http://mastodon-streaming.social.svc:4000' } },
          routes: [{ match: '/api/v1/streaming/*', upstream: 'streaming' }],
        },
      }),
      'NetworkPolicy',
    );
    expect(np.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(np.spec.egress.flatMap((e: K8sObject) => e.ports.map((p: K8sObject) => p.port))).toEqual(
      expect.arrayContaining([3000, 4000]),
    );
  });
});

describeRendered("ingress mode sends Mastodon's streaming path to its own Service", () => {
  it('renders config.upstreams and config.routes into limits.yaml, rolls the pods when they change, and the gateway accepts the file', () => {
    const streaming = {
      config: {
        ...NAMED,
        upstreams: { streaming: { url: 'http://mastodon-streaming.social.svc:4000', timeout: 0 } },
        routes: [{ match: '/api/v1/streaming/*', upstream: 'streaming' }],
      },
    };
    const r = render({ ...MASTODON, ...streaming });
    const table = parseYaml(find(r, 'ConfigMap', 'edge-rategate').data['limits.yaml'] as string) as K8sObject;
    expect(table.upstreams.streaming.url).toBe('http://mastodon-streaming.social.svc:4000');
    expect(table.routes).toEqual([{ match: '/api/v1/streaming/*', upstream: 'streaming' }]);
    const sum = (x: typeof r): string =>
      find(x, 'Deployment').spec.template.metadata.annotations['checksum/restart-settings'];
    expect(sum(r)).not.toBe(sum(render(MASTODON)));
    expect(r.notes).toMatch(/Upstream "streaming": http:\/\/mastodon-streaming/);
    expect(schemaErrors({ ...MASTODON, ...streaming })).toEqual([]);
  });
});

describeRendered('a table the gateway would refuse never reaches the pods', () => {
  const hookOf = (r: ReturnType<typeof render>) => ({
    job: find(r, 'Job'),
    map: find(r, 'ConfigMap', 'edge-rategate-check'),
  });

  it('runs `rategate check` in a pre-install,pre-upgrade hook Job on the new table, carried by a hook ConfigMap of its own', () => {
    const r = render(MASTODON);
    const { job, map } = hookOf(r);
    for (const o of [job, map]) {
      expect(o.metadata.annotations['helm.sh/hook']).toBe('pre-install,pre-upgrade');
      expect(k8sErrors(o)).toEqual([]);
    }
    // The table comes first (lower weight), then the Job that reads it.
    expect(Number(map.metadata.annotations['helm.sh/hook-weight'])).toBeLessThan(
      Number(job.metadata.annotations['helm.sh/hook-weight']),
    );
    // The very text the release's ConfigMap gets (up to the block's final newline, which YAML ignores).
    expect((map.data['limits.yaml'] as string).trimEnd()).toBe(
      (find(r, 'ConfigMap', 'edge-rategate').data['limits.yaml'] as string).trimEnd(),
    );
    const pod = job.spec.template.spec;
    expect(job.spec.backoffLimit).toBe(0);
    expect(pod.containers[0].args).toEqual(['check', '--config', '/etc/rategate-check/limits.yaml']);
    expect(pod.volumes[0].configMap.name).toBe('edge-rategate-check');
    expect(pod.containers[0].image).toBe(find(r, 'Deployment').spec.template.spec.containers[0].image);
  });

  it('the hook’s table fails the real `rategate check` for duplicate names and cost above limit, which the schema lets through', () => {
    const bad = {
      ...MASTODON,
      limits: [
        { name: 'api', match: '/api/*', per: 'ip', limit: 5, period: '1m' },
        { name: 'api', match: '/auth/*', per: 'ip', limit: 5, period: '1m', cost: 9 },
      ],
    };
    // JSON Schema cannot compare two fields or two list items by one key: values.schema.json accepts it…
    expect(schemaErrors(bad)).toEqual([]);
    // …and the hook, running the gateway's own check on exactly the table it carries, refuses it.
    const { job, map } = hookOf(render(bad));
    const env = Object.fromEntries(
      (job.spec.template.spec.containers[0].env as K8sObject[]).map((e) => [e.name, e.value]),
    );
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'rategate-hook-')), 'limits.yaml');
    writeFileSync(file, map.data['limits.yaml'] as string);
    let out = '';
    let code = 0;
    try {
      execFileSync(process.execPath, cliArgs([...job.spec.template.spec.containers[0].args.slice(0, 2), file]), {
        cwd: ROOT,
        env: { ...process.env, ...env },
        encoding: 'utf8',
        stdio: 'pipe',
      });
    } catch (err) {
      code = (err as { status: number }).status;
      out = String((err as { stderr: string }).stderr);
    }
    expect(code).toBe(78);
    expect(out).toMatch(/limits\[1\]\.name: duplicate rule name "api"/);
    expect(out).toMatch(/limits\[1\]\.cost: cost 9 exceeds limit 5/);
    // The good table passes the same check.
    const good = hookOf(render(MASTODON)).map.data['limits.yaml'] as string;
    writeFileSync(file, good);
    execFileSync(process.execPath, cliArgs(['check', '--config', file]), {
      cwd: ROOT,
      env: { ...process.env, ...env },
      encoding: 'utf8',
      stdio: 'pipe',
    });
  });

  it('can be turned off', () => {
    expect(
      render({ ...MASTODON, configCheck: { enabled: false } }).manifests.some((m) => m.object.kind === 'Job'),
    ).toBe(false);
  });
});

describeRendered('the PrometheusRule links runbooks absolutely and watches the chart’s own job', () => {
  it('rewrites runbook_url to prometheusRule.runbookBaseUrl and the availability rules to the metrics Service’s job', () => {
    const rulesOf = (o: object): K8sObject[] =>
      find(render({ ...MASTODON, prometheusRule: { enabled: true, ...o } }), 'PrometheusRule').spec.groups.flatMap(
        (g: K8sObject) => g.rules,
      );
    const byDefault = rulesOf({});
    for (const r of byDefault)
      expect(r.annotations.runbook_url).toBe(
        `https://github.com/rategate/rategate/blob/main/README.md#${String(r.alert).toLowerCase()}`,
      );
    const wiki = rulesOf({ runbookBaseUrl: 'https://wiki.example.org/ops/rategate' });
    for (const r of wiki)
      expect(r.annotations.runbook_url).toBe(`https://wiki.example.org/ops/rategate#${String(r.alert).toLowerCase()}`);
    const down = byDefault.find((r) => r.alert === 'RategateDown');
    const absent = byDefault.find((r) => r.alert === 'RategateAbsent');
    expect(down?.expr).toBe('up{job="edge-rategate-metrics"} == 0');
    // The fleet-wide RategateDown (critical past a third of the job down) watches the same job.
    const fleetDown = byDefault.find((r) => r.alert === 'RategateDown' && r.labels.severity === 'critical');
    expect(fleetDown?.expr).toMatch(
      /^count by \(job\) \(up\{job="edge-rategate-metrics"\} == 0\)\s+> count by \(job\) \(up\{job="edge-rategate-metrics"\}\) \/ 3$/,
    );
    expect(absent?.expr).toBe('absent(up{job="edge-rategate-metrics"})');
    expect(schemaErrors({ ...MASTODON, prometheusRule: { runbookBaseUrl: 'README.md' } })).not.toEqual([]);
  });
});

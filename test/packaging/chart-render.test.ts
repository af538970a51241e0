/**
 * @module The Helm chart rendered with Helm's engine semantics (scripts/helm-render) in the modes operators
 * use, every object validated against the Kubernetes schemas, and what each feature must render.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { validateConfig } from '../../src/config/index.js';
import {
  find,
  k8sErrors,
  kinds,
  render as renderChart,
  rendererUnavailable,
  renderError as renderChartError,
  type K8sObject,
  type Rendered,
  type RenderOptions,
} from './render.js';
import { startTestGateway, SEED_TABLE } from '../support/gateway.js';
import { BASELINE_BYTES, BYTES_PER_BUCKET, maxKeysFor } from '../../src/limiter/memory/key-bound.js';
import { CHART, read } from './support.js';

if (rendererUnavailable !== null) console.warn(`chart rendering tests skipped: ${rendererUnavailable}`);
const describeRendered = describe.skipIf(rendererUnavailable !== null);

/**
 * Ingress mode needs upstream.url written out (the chart refuses it missing): these tests, about other
 * features, render the demo upstream unless they set one.
 */
const DEMO = { upstream: { url: 'builtin' } };
const render = (overrides: object = {}, options: RenderOptions = {}): Rendered =>
  renderChart({ ...DEMO, ...overrides }, options);
const renderError = (overrides: object, options: RenderOptions = {}): string =>
  renderChartError({ ...DEMO, ...overrides }, options);
/** server.drainGrace in milliseconds as the gateway reads it from a config document. */
function drainGraceMs(doc: object): number {
  const result = validateConfig({ limits: [], ...doc });
  if (!result.ok) throw new Error(JSON.stringify(result.errors));
  return result.config.server.drainGrace;
}

/** Behind an Ingress controller the chart wants to be told who sets the client's address (README: Client addresses). */
const NAMED = { clients: { trustedProxies: ['10.244.0.0/16'] } };
const SIDECAR = {
  mode: 'sidecar',
  app: { image: { repository: 'ghcr.io/mastodon/mastodon', tag: 'v4.3.0' }, port: 3000 },
  config: NAMED,
};
const LOAD_BALANCED = {
  service: { type: 'LoadBalancer' },
  replicaCount: 3,
  store: { url: 'redis://redis-master.redis.svc:6379' },
};
const EVERYTHING = {
  upstream: { url: 'http://mastodon-web.social.svc:3000' },
  store: { url: 'redis://redis-master.redis.svc:6380' },
  admin: { token: 'admin-s3cret-token' },
  service: { type: 'LoadBalancer' },
  autoscaling: { enabled: true },
  podDisruptionBudget: { enabled: true },
  serviceMonitor: { enabled: true, labels: { release: 'kube-prometheus-stack' } },
  prometheusRule: { enabled: true, labels: { release: 'kube-prometheus-stack' } },
  networkPolicy: { enabled: true, admin: { namespaces: ['monitoring'] } },
  ingress: {
    enabled: true,
    className: 'nginx',
    hosts: [{ host: 'social.example.com', paths: [{ path: '/api', pathType: 'Prefix' }, { path: '/oauth' }] }],
    tls: [{ secretName: 'social-tls', hosts: ['social.example.com'] }],
  },
  helmTest: { enabled: true },
  dashboards: { enabled: true },
  config: { store: { prefix: 'edge', onError: 'allow' }, server: { maxBodySize: '40MB' }, ...NAMED },
};
const MODES: [string, object][] = [
  ['the defaults', {}],
  ['sidecar mode', SIDECAR],
  ['a LoadBalancer with Redis and 3 replicas', LOAD_BALANCED],
  ['every feature on at once', EVERYTHING],
  [
    'every feature on in sidecar mode',
    { ...EVERYTHING, ...SIDECAR, config: EVERYTHING.config, upstream: { url: 'builtin' } },
  ],
];

const env = (deployment: K8sObject, name: string): K8sObject | undefined =>
  (deployment.spec.template.spec.containers[0].env as K8sObject[]).find((e) => e.name === name);
const checksum = (r: Rendered): string =>
  find(r, 'Deployment').spec.template.metadata.annotations['checksum/restart-settings'];
const podTemplate = (r: Rendered): string => JSON.stringify(find(r, 'Deployment').spec.template);

describeRendered('the chart, rendered', () => {
  describe.each(MODES)('with %s', (_name, overrides) => {
    const rendered = render(overrides);

    it('renders only objects that validate against the Kubernetes schemas', () => {
      expect(rendered.manifests.length).toBeGreaterThan(3);
      expect(rendered.manifests.flatMap((m) => k8sErrors(m.object))).toEqual([]);
    });

    it('puts every object in the release namespace and labels it with the release', () => {
      for (const { object } of rendered.manifests) {
        expect(object.metadata.namespace, object.kind).toBe('social');
        expect(object.metadata.labels['app.kubernetes.io/instance'], object.kind).toBe('edge');
      }
    });

    it('renders a limits.yaml the gateway accepts, with the settings the Deployment passes', () => {
      const deployment = find(rendered, 'Deployment');
      const text = find(rendered, 'ConfigMap', 'edge-rategate').data['limits.yaml'] as string;
      const doc = parseYaml(text) as { limits: unknown };
      expect(doc.limits).toEqual(rendered.values.limits);
      const result = validateConfig(doc, {
        listen: env(deployment, 'RATEGATE_LISTEN')?.value,
        adminListen: env(deployment, 'RATEGATE_ADMIN_LISTEN')?.value,
        upstream: env(deployment, 'RATEGATE_UPSTREAM')?.value,
        store: env(deployment, 'RATEGATE_STORE')?.value,
      });
      expect(result.ok ? [] : result.errors).toEqual([]);
    });

    it('never puts the admin port on the client-facing Service, and serves it on a ClusterIP metrics Service', () => {
      const client = find(rendered, 'Service', 'edge-rategate');
      expect(client.spec.ports.map((p: K8sObject) => p.targetPort)).toEqual(['http']);
      const metrics = find(rendered, 'Service', 'edge-rategate-metrics');
      expect(metrics.spec.type).toBe('ClusterIP');
      expect(metrics.spec.ports).toEqual([{ name: 'metrics', port: 9464, targetPort: 'admin', protocol: 'TCP' }]);
    });
  });

  it('renders only the core objects by default', () => {
    // The second ConfigMap and the Job are the pre-install/pre-upgrade check (deploy-guards.test.ts).
    expect(kinds(render())).toEqual([
      'ConfigMap',
      'ConfigMap',
      'Deployment',
      'Job',
      'Service',
      'Service',
      'ServiceAccount',
    ]);
  });

  it('renders every resource of the chart with every feature on', () => {
    expect(kinds(render(EVERYTHING))).toEqual([
      'ConfigMap',
      'ConfigMap',
      'ConfigMap',
      'Deployment',
      'HorizontalPodAutoscaler',
      'Ingress',
      'Job',
      'NetworkPolicy',
      'Pod',
      'PodDisruptionBudget',
      'PrometheusRule',
      'Secret',
      'Service',
      'Service',
      'ServiceAccount',
      'ServiceMonitor',
    ]);
  });

  it('validates the values it rendered with against values.schema.json in every mode (through the renderer’s own merge)', async () => {
    const { Ajv } = await import('ajv');
    const check = new Ajv({
      allErrors: true,
      strictTypes: false,
      strictRequired: false,
      allowUnionTypes: true,
    }).compile(JSON.parse(read('helm/rategate/values.schema.json')));
    for (const [name, overrides] of MODES)
      expect(check(render(overrides).values) ? [] : check.errors, name).toEqual([]);
  });
});

describeRendered('the Deployment, rendered', () => {
  const ingress = render();
  const deployment = find(ingress, 'Deployment');
  const gateway = deployment.spec.template.spec.containers[0];

  it('probes liveness on /healthz and readiness on /readyz of the admin port, bound off loopback', () => {
    expect(gateway.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'admin' });
    expect(gateway.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'admin' });
    expect(gateway.ports).toEqual([
      { name: 'http', containerPort: 8080, protocol: 'TCP' },
      { name: 'admin', containerPort: 9464, protocol: 'TCP' },
    ]);
    expect(env(deployment, 'RATEGATE_ADMIN_LISTEN')?.value).toBe('0.0.0.0:9464');
  });

  it('applies the hardened security contexts, with a writable /tmp for the read-only root', () => {
    expect(deployment.spec.template.spec.securityContext).toMatchObject({
      runAsNonRoot: true,
      runAsUser: 10001,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(gateway.securityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
    });
    expect(gateway.volumeMounts).toContainEqual({ name: 'tmp', mountPath: '/tmp' });
    expect(deployment.spec.template.spec.automountServiceAccountToken).toBe(false);
  });

  it('mounts the ConfigMap as a directory, never with subPath, so the gateway sees its updates', () => {
    expect(gateway.volumeMounts).toContainEqual({ name: 'config', mountPath: '/etc/rategate', readOnly: true });
    expect(JSON.stringify(deployment)).not.toContain('subPath');
    expect(deployment.spec.template.spec.volumes).toContainEqual({
      name: 'config',
      configMap: { name: 'edge-rategate' },
    });
    expect(gateway.args).toEqual(['serve', '--config', '/etc/rategate/limits.yaml']);
  });

  it('pauses before SIGTERM and refuses a grace period shorter than the pause plus the gateway drain', () => {
    expect(gateway.lifecycle.preStop.exec.command).toEqual(['sleep', '5']);
    // Derived: the 5 s pause + the gateway's default drain (server.drainGrace, 10 s) + 15 s to stop.
    expect(drainGraceMs({})).toBe(10_000);
    expect(deployment.spec.template.spec.terminationGracePeriodSeconds).toBe(30);
    expect(renderError({ terminationGracePeriodSeconds: 15, lifecycle: { preStopSleepSeconds: 5 } })).toMatch(
      /must exceed lifecycle\.preStopSleepSeconds \(5\) plus the gateway's 10 s drain/,
    );
  });

  it('derives the termination grace period from config.server.drainGrace, read as the gateway reads a duration', () => {
    const grace = (drainGrace: unknown, values: object = {}): unknown =>
      find(render({ ...values, config: { server: { drainGrace } } }), 'Deployment').spec.template.spec
        .terminationGracePeriodSeconds;
    for (const [written, seconds] of [
      ['30s', 30],
      ['1m30s', 90],
      ['2500ms', 3],
      [45_000, 45],
      ['12000', 12],
    ] as const) {
      // The chart's reading is the gateway's, rounded up to whole seconds.
      expect(Math.ceil(drainGraceMs({ server: { drainGrace: written } }) / 1000)).toBe(seconds);
      expect(grace(written)).toBe(5 + seconds + 15);
    }
    expect(grace('30s', { lifecycle: { preStopSleepSeconds: 0 } })).toBe(45);
    expect(renderError({ config: { server: { drainGrace: '30s' } }, terminationGracePeriodSeconds: 30 })).toMatch(
      /terminationGracePeriodSeconds \(30\) must exceed lifecycle\.preStopSleepSeconds \(5\) plus the gateway's 30 s drain/,
    );
    expect(renderError({ config: { server: { drainGrace: '30 seconds' } } })).toMatch(
      /config\.server\.drainGrace: invalid duration "30 seconds"/,
    );
  });

  it('takes the store URL from a Secret when one is named', () => {
    const r = render({ store: { existingSecret: 'rategate-store' } });
    expect(env(find(r, 'Deployment'), 'RATEGATE_STORE')).toEqual({
      name: 'RATEGATE_STORE',
      valueFrom: { secretKeyRef: { name: 'rategate-store', key: 'url' } },
    });
  });

  it.each([
    'redis://:Sup3r-s3cret@redis-master.redis.svc:6379',
    'rediss://default:Sup3r-s3cret@redis.example:6380/2',
    'redis-sentinel://:Sup3r-s3cret@sentinel-0:26379,sentinel-1:26379/mymaster',
    'redis-cluster://app:Sup3r-s3cret@r1:7000,r2:7001',
    'redis+unix://:Sup3r-s3cret@/run/redis.sock',
  ])('refuses a store.url with a password (%s), naming store.existingSecret, and renders it nowhere', (url) => {
    const message = renderError({ store: { url }, configCheck: { enabled: true } });
    expect(message).toMatch(/store\.url carries a password, .* name it in store\.existingSecret/);
    expect(message).not.toContain('Sup3r-s3cret');
  });

  it('takes a store.url with a user name and no password, and NOTES show the URL', () => {
    const r = render({ store: { url: 'redis://rategate@redis-master.redis.svc:6379' } });
    expect(env(find(r, 'Deployment'), 'RATEGATE_STORE')?.value).toBe('redis://rategate@redis-master.redis.svc:6379');
    expect(r.notes).toContain('Store: redis://rategate@redis-master.redis.svc:6379');
  });

  it('passes the URL from store.existingSecret to the config-check Job too, and NOTES name the Secret only', () => {
    const r = render({
      store: { existingSecret: 'rategate-store', existingSecretKey: 'redis-url' },
      configCheck: { enabled: true },
    });
    const job = find(r, 'Job');
    const jobEnv = (job.spec.template.spec.containers as K8sObject[]).flatMap((c) => (c.env ?? []) as K8sObject[]);
    expect(jobEnv.find((e) => e.name === 'RATEGATE_STORE')).toEqual({
      name: 'RATEGATE_STORE',
      valueFrom: { secretKeyRef: { name: 'rategate-store', key: 'redis-url' } },
    });
    expect(r.notes).toContain('Store: from Secret rategate-store/redis-url');
  });

  it('omits replicas when the HPA owns them', () => {
    expect(deployment.spec.replicas).toBe(1);
    expect(find(render(LOAD_BALANCED), 'Deployment').spec.replicas).toBe(3);
    const scaled = render({ autoscaling: { enabled: true }, store: { url: 'redis://r:6379' } });
    expect(find(scaled, 'Deployment').spec).not.toHaveProperty('replicas');
    expect(find(scaled, 'HorizontalPodAutoscaler').spec).toMatchObject({
      minReplicas: 2,
      maxReplicas: 10,
      scaleTargetRef: { kind: 'Deployment', name: 'edge-rategate' },
    });
  });

  it('in sidecar mode runs the app beside the gateway, proxied over loopback, with only the gateway in the Service', () => {
    const r = render(SIDECAR);
    const d = find(r, 'Deployment');
    expect(d.spec.template.spec.containers.map((c: K8sObject) => c.name)).toEqual(['rategate', 'app']);
    expect(d.spec.template.spec.containers[1]).toMatchObject({
      image: 'ghcr.io/mastodon/mastodon:v4.3.0',
      ports: [{ name: 'app', containerPort: 3000, protocol: 'TCP' }],
    });
    expect(env(d, 'RATEGATE_UPSTREAM')?.value).toBe('http://127.0.0.1:3000');
    expect(find(r, 'Service', 'edge-rategate').spec.ports).toEqual([
      { name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' },
    ]);
    expect(renderError({ mode: 'sidecar', config: NAMED })).toMatch(
      /app\.image\.repository is required in sidecar mode/,
    );
    expect(renderError({ ...SIDECAR, app: { ...SIDECAR.app, port: 8080 } })).toMatch(/app\.port must differ/);
  });

  it('warns in NOTES when the memory store runs on several replicas', () => {
    expect(render({ replicaCount: 3 }).notes).toMatch(/WARNING: store\.url is "memory" with 3 replicas/);
    expect(render(LOAD_BALANCED).notes).not.toMatch(/WARNING/);
  });
});

describeRendered('restart-only settings', () => {
  const base = render();

  it.each([
    ['store.prefix', { config: { store: { prefix: 'edge2' } } }],
    ['store.timeout', { config: { store: { timeout: '20ms' } } }],
    ['upstream.timeout', { config: { upstream: { timeout: '10s' } } }],
    ['server.maxConnections', { config: { server: { maxConnections: 100 } } }],
    ['admin.token', { admin: { token: 'rotated' } }],
  ])('editing %s changes the pod template, so the pods roll', (_name, overrides) => {
    const changed = render(overrides);
    expect(checksum(changed)).not.toBe(checksum(base));
    expect(podTemplate(changed)).not.toBe(podTemplate(base));
  });

  it.each([
    ['only the limits', { limits: [{ name: 'ip-access', match: '/api/*', per: 'ip', limit: 600, period: '5m' }] }],
    ['responses and exempt', { config: { responses: { reset: 'unix' }, exempt: { ips: ['10.0.0.1'] } } }],
    ['the body limits', { config: { server: { maxBodySize: '10MB' } } }],
  ])('editing %s leaves the pod template alone: the table reloads live', (_name, overrides) => {
    const changed = render(overrides);
    expect(find(changed, 'ConfigMap', 'edge-rategate').data).not.toEqual(find(base, 'ConfigMap', 'edge-rategate').data);
    expect(podTemplate(changed)).toBe(podTemplate(base));
  });
});

describeRendered('config keys the chart sets itself', () => {
  it.each([
    [{ listen: '0.0.0.0:80' }, /config\.listen is set by the chart; use gateway\.port/],
    [{ admin: { listen: '0.0.0.0:9000' } }, /config\.admin\.listen is set by the chart; use gateway\.adminPort/],
    [{ upstream: { url: 'http://api:3000' } }, /config\.upstream\.url is set by the chart; use upstream\.url/],
    [
      { store: { url: 'redis://r:6379' } },
      /config\.store\.url is set by the chart; use store\.url or store\.existingSecret/,
    ],
    [{ limits: [] }, /config\.limits is set by the chart; use the value limits/],
  ])('refuses config %j, which the gateway would ignore for the chart’s own setting', (config, message) => {
    expect(renderError({ config })).toMatch(message);
  });
});

describeRendered('the admin token', () => {
  it('is kept in a Secret and reaches the pod as RATEGATE_ADMIN_TOKEN, never through the ConfigMap', () => {
    const r = render({ admin: { token: 'admin-s3cret-token' } });
    const secret = find(r, 'Secret');
    expect(secret.metadata.name).toBe('edge-rategate-admin');
    expect(Buffer.from(secret.data.token, 'base64').toString()).toBe('admin-s3cret-token');
    expect(env(find(r, 'Deployment'), 'RATEGATE_ADMIN_TOKEN')).toEqual({
      name: 'RATEGATE_ADMIN_TOKEN',
      valueFrom: { secretKeyRef: { name: 'edge-rategate-admin', key: 'token' } },
    });
    for (const { object } of r.manifests.filter((m) => m.object.kind !== 'Secret'))
      expect(JSON.stringify(object), object.kind).not.toContain('admin-s3cret-token');
  });

  it('comes from an existing Secret, under key `token` unless told otherwise, and the chart makes none', () => {
    const r = render({ admin: { existingSecret: 'edge-admin' } });
    expect(kinds(r)).not.toContain('Secret');
    expect(env(find(r, 'Deployment'), 'RATEGATE_ADMIN_TOKEN')?.valueFrom).toEqual({
      secretKeyRef: { name: 'edge-admin', key: 'token' },
    });
    const keyed = render({ admin: { existingSecret: 'edge-admin', existingSecretKey: 'bearer' } });
    expect(env(find(keyed, 'Deployment'), 'RATEGATE_ADMIN_TOKEN')?.valueFrom).toEqual({
      secretKeyRef: { name: 'edge-admin', key: 'bearer' },
    });
  });

  it('is absent without a token, and config.admin.token is refused rather than written in clear', () => {
    expect(env(find(render(), 'Deployment'), 'RATEGATE_ADMIN_TOKEN')).toBeUndefined();
    expect(renderError({ config: { admin: { token: 'in-clear' } } })).toMatch(
      /config\.admin\.token would put the admin token in the ConfigMap/,
    );
  });

  it.each(['ClusterIP', 'NodePort', 'LoadBalancer'])(
    'stays off a %s client Service; the ServiceMonitor scrapes the metrics Service',
    (type) => {
      const r = render({ service: { type }, serviceMonitor: { enabled: true } });
      const client = find(r, 'Service', 'edge-rategate');
      expect(client.spec.type).toBe(type);
      expect(client.spec.ports.map((p: K8sObject) => p.targetPort)).not.toContain('admin');
      const metrics = find(r, 'Service', 'edge-rategate-metrics');
      const selector = find(r, 'ServiceMonitor').spec.selector.matchLabels as Record<string, string>;
      const selects = (svc: K8sObject): boolean =>
        Object.entries(selector).every(([k, v]) => svc.metadata.labels[k] === v);
      expect(selects(metrics)).toBe(true);
      expect(selects(client)).toBe(false);
      expect(find(r, 'ServiceMonitor').spec.endpoints[0]).toMatchObject({ port: 'metrics', path: '/metrics' });
    },
  );
});

describeRendered('the PodDisruptionBudget', () => {
  const pdb = (values: object): K8sObject =>
    find(render({ podDisruptionBudget: { enabled: true, ...values } }), 'PodDisruptionBudget').spec;

  it('renders maxUnavailable 0 as 0, not as the default 1', () => {
    expect(pdb({ maxUnavailable: 0 })).toMatchObject({ maxUnavailable: 0 });
  });

  it('renders counts, percentages and minAvailable as given, minAvailable first', () => {
    expect(pdb({})).toMatchObject({ maxUnavailable: 1 });
    expect(pdb({ maxUnavailable: '50%' })).toMatchObject({ maxUnavailable: '50%' });
    expect(pdb({ minAvailable: 0 })).toEqual(expect.objectContaining({ minAvailable: 0 }));
    expect(pdb({ minAvailable: 2, maxUnavailable: 1 })).not.toHaveProperty('maxUnavailable');
    expect(pdb({ maxUnavailable: null })).toMatchObject({ maxUnavailable: 1 });
  });
});

describeRendered('the optional resources', () => {
  const r = render(EVERYTHING);

  it('the PrometheusRule carries alerts/rategate.rules.yaml', () => {
    const rule = find(r, 'PrometheusRule');
    const text = read('helm/rategate/alerts/rategate.rules.yaml');
    // The same rules, with the one rewrite the chart makes: the availability rules' job is its metrics Service's.
    const file = parseYaml(text.replaceAll('job=~".*rategate.*"', 'job="edge-rategate-metrics"')) as {
      groups: unknown;
    };
    expect(rule.spec.groups).toEqual(file.groups);
    expect(rule.metadata.labels.release).toBe('kube-prometheus-stack');
  });

  it('the NetworkPolicy opens the proxy port to all, the admin port only to what is set, and egress only to DNS, upstream and Redis', () => {
    const np = find(r, 'NetworkPolicy').spec;
    expect(np.podSelector.matchLabels).toEqual({
      'app.kubernetes.io/name': 'rategate',
      'app.kubernetes.io/instance': 'edge',
    });
    expect(np.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(np.ingress[0]).toEqual({ ports: [{ port: 'http', protocol: 'TCP' }] });
    expect(np.ingress[1]).toEqual({
      from: [
        { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } },
        {
          podSelector: {
            matchLabels: { 'app.kubernetes.io/name': 'rategate-test', 'app.kubernetes.io/instance': 'edge' },
          },
        },
      ],
      ports: [{ port: 'admin', protocol: 'TCP' }],
    });
    expect(np.egress.map((e: K8sObject) => e.ports)).toEqual([
      [
        { port: 53, protocol: 'UDP' },
        { port: 53, protocol: 'TCP' },
      ],
      [{ port: 3000, protocol: 'TCP' }],
      [{ port: 6380, protocol: 'TCP' }],
    ]);
  });

  it('the NetworkPolicy finds every Redis Cluster port, the https default, and no admin rule when nothing is allowed', () => {
    const np = find(
      render({
        networkPolicy: { enabled: true },
        upstream: { url: 'https://api.example.com' },
        store: { url: 'redis-cluster://rategate@r1:7000,r2:7001,r3' },
        config: NAMED,
      }),
      'NetworkPolicy',
    ).spec;
    expect(np.ingress).toHaveLength(1);
    expect(np.egress.map((e: K8sObject) => e.ports)).toEqual([
      [
        { port: 53, protocol: 'UDP' },
        { port: 53, protocol: 'TCP' },
      ],
      [{ port: 443, protocol: 'TCP' }],
      [
        { port: 7000, protocol: 'TCP' },
        { port: 7001, protocol: 'TCP' },
        { port: 6379, protocol: 'TCP' },
      ],
    ]);
    const open = find(render({ networkPolicy: { enabled: true, egress: { enabled: false } } }), 'NetworkPolicy').spec;
    expect(open.policyTypes).toEqual(['Ingress']);
    expect(open).not.toHaveProperty('egress');
  });

  it('the Ingress routes hosts[].paths[] to the proxy port, with its class and TLS', () => {
    const ing = find(r, 'Ingress').spec;
    expect(ing.ingressClassName).toBe('nginx');
    expect(ing.tls).toEqual([{ secretName: 'social-tls', hosts: ['social.example.com'] }]);
    expect(ing.rules).toEqual([
      {
        host: 'social.example.com',
        http: {
          paths: [
            {
              path: '/api',
              pathType: 'Prefix',
              backend: { service: { name: 'edge-rategate', port: { name: 'http' } } },
            },
            {
              path: '/oauth',
              pathType: 'Prefix',
              backend: { service: { name: 'edge-rategate', port: { name: 'http' } } },
            },
          ],
        },
      },
    ]);
  });

  it('the helm test pod checks /readyz on the metrics Service and one request through the gateway, and no Service selects it', () => {
    const pod = find(r, 'Pod');
    expect(pod.metadata.annotations['helm.sh/hook']).toBe('test');
    expect(pod.spec.restartPolicy).toBe('Never');
    const container = pod.spec.containers[0];
    expect(container.env).toEqual([
      { name: 'READYZ_URL', value: 'http://edge-rategate-metrics:9464/readyz' },
      { name: 'PROXY_URL', value: 'http://edge-rategate:80/api/v1/accounts/verify_credentials' },
    ]);
    expect(container.command.slice(0, 3)).toEqual(['node', '--input-type=module', '-e']);
    for (const svc of r.manifests.filter((m) => m.object.kind === 'Service')) {
      const selector = svc.object.spec.selector as Record<string, string>;
      expect(Object.entries(selector).every(([k, v]) => pod.metadata.labels[k] === v)).toBe(false);
    }
  });
});

describeRendered('the memory limit the default store.maxKeys is derived from', () => {
  it("passes the container's limits.memory as RATEGATE_MEMORY_LIMIT, and with the chart's 256Mi the bound fits in 90 % of it", () => {
    const deployment = find(render(), 'Deployment');
    const container = deployment.spec.template.spec.containers[0];
    expect(env(deployment, 'RATEGATE_MEMORY_LIMIT')).toEqual({
      name: 'RATEGATE_MEMORY_LIMIT',
      valueFrom: { resourceFieldRef: { resource: 'limits.memory' } },
    });
    expect(container.resources.limits.memory).toBe('256Mi');
    const limit = 256 * 2 ** 20;
    const keys = maxKeysFor(limit, BASELINE_BYTES, BYTES_PER_BUCKET);
    expect(BASELINE_BYTES + keys * BYTES_PER_BUCKET).toBeLessThanOrEqual(0.9 * limit);
  });

  it('leaves it to the cgroup reading when no memory limit is set', () => {
    const deployment = find(render({ resources: { limits: { memory: null } } }), 'Deployment');
    expect(env(deployment, 'RATEGATE_MEMORY_LIMIT')).toBeUndefined();
  });
});

describeRendered('the helm test pod’s check, run against a real gateway', () => {
  const pod = find(render({ helmTest: { enabled: true } }), 'Pod');
  const [node, ...args] = pod.spec.containers[0].command as string[];
  /** Runs the pod's command here with its URLs pointed at a local gateway; resolves to the exit code. */
  const runCheck = (readyz: string, proxied: string): Promise<{ code: number; out: string }> =>
    new Promise((resolve) => {
      execFile(
        node === 'node' ? process.execPath : String(node),
        args,
        { env: { ...process.env, READYZ_URL: readyz, PROXY_URL: proxied } },
        (err, stdout, stderr) => {
          resolve({ code: err === null ? 0 : Number((err as { code?: number }).code ?? 1), out: `${stdout}${stderr}` });
        },
      );
    });
  const path = (pod.spec.containers[0].env as K8sObject[])
    .find((e) => e.name === 'PROXY_URL')
    ?.value.replace(/^http:\/\/[^/]+/, '');

  it('passes when the gateway is ready and forwards the request', async () => {
    const gw = await startTestGateway(SEED_TABLE, { upstream: 'builtin' });
    try {
      const result = await runCheck(`${gw.adminUrl}/readyz`, `${gw.url}${path}`);
      expect(result.out).toMatch(/ready: GET .* -> 200[\s\S]*proxied: GET .* -> 401/);
      expect(result.code).toBe(0);
    } finally {
      await gw.shutdown(1000);
    }
  });

  it('fails when the upstream is unreachable: the gateway stays ready, the proxied request gets a 502', async () => {
    const gw = await startTestGateway(SEED_TABLE, { upstream: 'http://127.0.0.1:9' });
    try {
      const result = await runCheck(`${gw.adminUrl}/readyz`, `${gw.url}${path}`);
      expect(result.code).toBe(1);
      expect(result.out).toMatch(/ready: GET .* -> 200[\s\S]*proxied: GET .* -> 502[\s\S]*proxied failed/);
    } finally {
      await gw.shutdown(1000);
    }
  });
});

describeRendered('a planted mistake', () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
  /** A copy of the chart with one template edited. */
  function broken(file: string, from: string | RegExp, to: string): string {
    const dir = mkdtempSync(join(tmpdir(), 'rategate-chart-'));
    dirs.push(dir);
    cpSync(CHART, dir, { recursive: true });
    const path = join(dir, 'templates', file);
    const text = readFileSync(path, 'utf8');
    const edited = text.replace(from, to);
    expect(edited).not.toBe(text);
    writeFileSync(path, edited);
    return dir;
  }
  const errorsOf = (chart: string, values: object = {}): string[] =>
    render(values, { chart }).manifests.flatMap((m) => k8sErrors(m.object));

  it('a string replicas fails the Kubernetes schema', () => {
    const chart = broken(
      'deployment.yaml',
      'replicas: {{ .Values.replicaCount }}',
      'replicas: {{ .Values.replicaCount | quote }}',
    );
    expect(errorsOf(chart)).toContainEqual(expect.stringContaining('spec/replicas must be integer'));
  });

  it('a quoted port, a misspelt field, a broken indentation and a template syntax error fail too', () => {
    const port = broken(
      'metrics-service.yaml',
      'port: {{ .Values.service.metricsPort }}',
      'port: "{{ .Values.service.metricsPort }}"',
    );
    expect(errorsOf(port)).toContainEqual(expect.stringContaining('port must be integer'));
    const indent = broken(
      'service.yaml',
      '  type: {{ .Values.service.type }}',
      '    type: {{ .Values.service.type }}\n  oops',
    );
    expect(() => render({}, { chart: indent })).toThrow(/YAML parse error on rategate\/templates\/service\.yaml/);
    const misspelt = broken('deployment.yaml', '          readinessProbe:', '          readinesProbe:');
    expect(errorsOf(misspelt)).toContainEqual(
      expect.stringContaining('unknown field /spec/template/spec/containers/0/readinesProbe'),
    );
    const syntax = broken('pdb.yaml', '{{- end }}\n  selector:', '\n  selector:');
    expect(() => render({}, { chart: syntax })).toThrow(/parse error in "rategate\/templates\/pdb\.yaml"/);
  });
});

describeRendered('TLS at the gateway (tls.existingSecret)', () => {
  const TLS = { ...LOAD_BALANCED, tls: { existingSecret: 'social-tls' } };
  const r = render(TLS);
  const deployment = find(r, 'Deployment');
  const gateway = deployment.spec.template.spec.containers[0];

  it('mounts the Secret as a directory, points config.server.tls at it and validates', () => {
    expect(r.manifests.flatMap((m) => k8sErrors(m.object))).toEqual([]);
    expect(gateway.volumeMounts).toContainEqual({ name: 'tls', mountPath: '/etc/rategate-tls', readOnly: true });
    expect(deployment.spec.template.spec.volumes).toContainEqual({ name: 'tls', secret: { secretName: 'social-tls' } });
    const table = parseYaml(find(r, 'ConfigMap', 'edge-rategate').data['limits.yaml'] as string) as K8sObject;
    expect(table.server.tls).toEqual({ certFile: '/etc/rategate-tls/tls.crt', keyFile: '/etc/rategate-tls/tls.key' });
    // The gateway reads the rendered table as a valid config.
    expect(validateConfig(table).ok).toBe(true);
  });

  it('gives the Service an https port 443 on the proxy port, and the helm test speaks https', () => {
    expect(find(r, 'Service', 'edge-rategate').spec.ports).toEqual([
      { name: 'https', port: 443, targetPort: 'http', protocol: 'TCP' },
    ]);
    const test = find(render({ ...TLS, helmTest: { enabled: true } }), 'Pod');
    expect(test.spec.containers[0].env).toContainEqual({
      name: 'PROXY_URL',
      value: 'https://edge-rategate:443/api/v1/accounts/verify_credentials',
    });
    expect(test.spec.containers[0].env).toContainEqual({ name: 'NODE_TLS_REJECT_UNAUTHORIZED', value: '0' });
    expect(find(render(LOAD_BALANCED), 'Service', 'edge-rategate').spec.ports).toEqual([
      { name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' },
    ]);
  });

  it('keeps a config.server.tls written by hand, and refuses an Ingress in front of a TLS gateway', () => {
    const own = render({ ...TLS, config: { server: { tls: { certFile: '/certs/a.pem', keyFile: '/certs/a.key' } } } });
    expect(
      (parseYaml(find(own, 'ConfigMap', 'edge-rategate').data['limits.yaml'] as string) as K8sObject).server.tls
        .certFile,
    ).toBe('/certs/a.pem');
    expect(
      renderError({
        ...TLS,
        ingress: { enabled: true, hosts: [{ host: 'a.example', paths: [{ path: '/' }] }] },
        config: NAMED,
      }),
    ).toMatch(/ingress\.enabled and tls\.existingSecret/);
  });
});

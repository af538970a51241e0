/**
 * @module The chart's sidecar recipe for an existing chart (examples/mastodon-sidecar): its patch, applied
 * to a Deployment shaped as the Mastodon chart renders its web pod, gives a valid Deployment whose gateway
 * proxies to Puma over loopback, and its ConfigMap holds a table the gateway accepts.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse as parseYaml, parseAllDocuments, stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../src/config/index.js';
import { k8sErrors, type K8sObject } from './render.js';
import { read, ROOT } from './support.js';

/** kubectl's built-in kustomize runs the recipe for real where it is installed (it is not in Debian's archive). */
const kustomizeMissing = spawnSync('kubectl', ['kustomize', '--help'], { encoding: 'utf8' }).status !== 0;
if (kustomizeMissing) console.warn('SKIPPING the real post-render of the Mastodon sidecar recipe: kubectl (with kustomize) not found');

const dir = 'helm/rategate/examples/mastodon-sidecar';
const load = (name: string): K8sObject => parseYaml(read(`${dir}/${name}`)) as K8sObject;
const kustomization = load('kustomization.yaml');
const patch = load('patch-web-deployment.yaml');
const generator = (kustomization.configMapGenerator as K8sObject[])[0]!;
/** The ConfigMap kustomize generates from the recipe's limits.yaml. */
const configMap: K8sObject = {
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: generator.name },
  data: Object.fromEntries((generator.files as string[]).map((f) => [f, read(`${dir}/${f}`)])),
};
const servicePatch = load('patch-web-service.yaml') as unknown as { op: string; path: string; value: string }[];

/** The web Deployment as github.com/mastodon/chart renders it (release "mastodon"), reduced to what matters. */
const mastodonWeb: K8sObject = {
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: 'mastodon-web' },
  spec: {
    replicas: 2,
    selector: { matchLabels: { 'app.kubernetes.io/name': 'mastodon', 'app.kubernetes.io/component': 'web' } },
    template: {
      metadata: { labels: { 'app.kubernetes.io/name': 'mastodon', 'app.kubernetes.io/component': 'web' } },
      spec: {
        volumes: [{ name: 'assets', persistentVolumeClaim: { claimName: 'mastodon-assets' } }],
        containers: [
          {
            name: 'mastodon-web',
            image: 'ghcr.io/mastodon/mastodon:v4.3.0',
            command: ['bundle', 'exec', 'puma', '-C', 'config/puma.rb'],
            env: [{ name: 'PORT', value: '3000' }],
            ports: [{ name: 'http', containerPort: 3000, protocol: 'TCP' }],
            readinessProbe: { httpGet: { path: '/health', port: 'http' } },
          },
        ],
      },
    },
  },
};

/**
 * Strategic merge of the lists the patch touches, as kustomize does: containers and volumes merged by
 * name (a container named in both keeps its fields, the patch's win), a container's env merged by name.
 */
function applyPatch(base: K8sObject, p: K8sObject): K8sObject {
  const out = structuredClone(base);
  const spec = out.spec.template.spec;
  const byName = (list: K8sObject[], add: K8sObject[], merge?: (a: K8sObject, b: K8sObject) => K8sObject): K8sObject[] => {
    const merged = list.map((x) => {
      const y = add.find((a) => a.name === x.name);
      return y === undefined ? x : merge ? merge(x, y) : y;
    });
    return [...merged, ...add.filter((a) => !list.some((x) => x.name === a.name))];
  };
  const mergeContainer = (a: K8sObject, b: K8sObject): K8sObject => ({ ...a, ...b, env: byName(a.env ?? [], b.env ?? []) });
  spec.containers = byName(spec.containers, p.spec.template.spec.containers, mergeContainer);
  spec.volumes = byName(spec.volumes ?? [], p.spec.template.spec.volumes);
  if (p.spec.template.spec.terminationGracePeriodSeconds !== undefined) spec.terminationGracePeriodSeconds = p.spec.template.spec.terminationGracePeriodSeconds;
  return out;
}

describe('the Mastodon sidecar recipe', () => {
  const patched = applyPatch(mastodonWeb, patch);
  const pod = patched.spec.template.spec;
  const gateway = pod.containers.find((c: K8sObject) => c.name === 'rategate');
  const env = (name: string): K8sObject | undefined => gateway.env.find((e: K8sObject) => e.name === name);

  it('patches the web Deployment and Service and ships the ConfigMap, by the names the Mastodon chart uses', () => {
    expect(kustomization.resources).toEqual(['helm-output.yaml']);
    expect(generator).toEqual({ name: 'mastodon-rategate', files: ['limits.yaml'], options: { disableNameSuffixHash: true } });
    expect(kustomization.patches).toEqual([
      { path: 'patch-web-deployment.yaml', target: { kind: 'Deployment', name: 'mastodon-web' } },
      { path: 'patch-web-service.yaml', target: { kind: 'Service', name: 'mastodon-web' } },
    ]);
    expect(read(`${dir}/post-render.sh`)).toMatch(/cat > helm-output\.yaml[\s\S]*kubectl kustomize/);
  });

  it('gives a Deployment and a ConfigMap that validate against the Kubernetes schemas', () => {
    expect(k8sErrors(patched)).toEqual([]);
    expect(k8sErrors(configMap)).toEqual([]);
  });

  it('proxies to Puma over loopback on its port, with port names distinct from the app’s', () => {
    const puma = mastodonWeb.spec.template.spec.containers[0];
    expect(env('RATEGATE_UPSTREAM')?.value).toBe(`http://127.0.0.1:${puma.ports[0].containerPort}`);
    const names = pod.containers.flatMap((c: K8sObject) => c.ports.map((p: K8sObject) => p.name));
    expect(new Set(names).size).toBe(names.length);
    const ports = pod.containers.flatMap((c: K8sObject) => c.ports.map((p: K8sObject) => p.containerPort));
    expect(new Set(ports).size).toBe(ports.length);
    // The Service now targets the gateway's port, so every request through it is counted.
    expect(servicePatch).toEqual([{ op: 'replace', path: '/spec/ports/0/targetPort', value: 'rategate' }]);
    expect(gateway.ports.map((p: K8sObject) => p.name)).toContain('rategate');
  });

  it('mounts its ConfigMap as a directory, keeps the admin token in a Secret, and outlasts its drain', () => {
    const mount = gateway.volumeMounts.find((m: K8sObject) => m.mountPath === '/etc/rategate');
    expect(mount).toMatchObject({ readOnly: true });
    expect(mount).not.toHaveProperty('subPath');
    expect(pod.volumes.find((v: K8sObject) => v.name === mount.name)?.configMap?.name).toBe(configMap.metadata.name);
    expect(env('RATEGATE_ADMIN_TOKEN')?.valueFrom?.secretKeyRef).toBeDefined();
    const table = parseYaml(configMap.data['limits.yaml'] as string) as K8sObject;
    expect(table.admin?.token).toBeUndefined();
    expect(table.admin?.tokenFile).toBeUndefined();
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(5 + 10);
  });

  it('holds a limit table the gateway accepts, counting v1 and v2 media uploads together', () => {
    const doc = parseYaml(configMap.data['limits.yaml'] as string) as { limits: { name: string; match: unknown }[] };
    const result = validateConfig(doc, {
      listen: env('RATEGATE_LISTEN')?.value,
      adminListen: env('RATEGATE_ADMIN_LISTEN')?.value,
      upstream: env('RATEGATE_UPSTREAM')?.value,
      store: 'redis://redis:6379',
    });
    expect(result.ok ? [] : result.errors).toEqual([]);
    expect(doc.limits.find((r) => r.name === 'api-media')?.match).toEqual(['POST /api/v1/media', 'POST /api/v2/media']);
  });

  it("is Mastodon's own table, the repository's config/examples/mastodon.yaml byte for byte", () => {
    // Re-sync after a change to the example: cp config/examples/mastodon.yaml helm/rategate/examples/mastodon-sidecar/limits.yaml
    expect(configMap.data['limits.yaml']).toBe(read('config/examples/mastodon.yaml'));
    const result = validateConfig(parseYaml(configMap.data['limits.yaml'] as string), {});
    if (!result.ok) throw new Error(result.errors.join('\n'));
    const rules = result.config.limits;
    // Mastodon: 1500 per 5 min per account, and the per-IP API limit for requests without an account only.
    expect(rules.find((r) => r.per === 'account' && r.match.includes('/api/*'))?.limit).toBe(1500);
    const perIpApi = rules.filter((r) => r.per === 'ip' && r.match.includes('/api/*'));
    expect(perIpApi.length).toBeGreaterThan(0);
    for (const r of perIpApi) expect(r.when?.authenticated).toBe(false);
  });

  it("makes Mastodon trust the gateway at 127.0.0.1 (TRUSTED_PROXY_IP replaces Rails' defaults), keeping Puma's own settings", () => {
    const puma = pod.containers.find((c: K8sObject) => c.name === 'mastodon-web');
    expect(puma.image).toBe('ghcr.io/mastodon/mastodon:v4.3.0');
    expect(puma.env.find((e: K8sObject) => e.name === 'PORT')?.value).toBe('3000');
    const trusted = String(puma.env.find((e: K8sObject) => e.name === 'TRUSTED_PROXY_IP')?.value ?? '').split(/\s*,\s*|\s+/);
    expect(trusted).toEqual(expect.arrayContaining(['127.0.0.1/8', '::1/128']));
    // The Ingress controller in front of the gateway is on a private address: still trusted, as by Rails' default.
    expect(trusted).toEqual(expect.arrayContaining(['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16']));
    expect(read('helm/rategate/README.md')).toMatch(/TRUSTED_PROXY_IP[\s\S]{0,600}RemoteIp|RemoteIp[\s\S]{0,600}TRUSTED_PROXY_IP/);
  });
});

describe.skipIf(kustomizeMissing)('the Mastodon sidecar recipe, run for real (post-render.sh → kubectl kustomize)', () => {
  it('turns the Mastodon chart’s web Deployment and Service into valid objects with the gateway, its table and TRUSTED_PROXY_IP', () => {
    const work = mkdtempSync(path.join(os.tmpdir(), 'rategate-recipe-'));
    cpSync(path.join(ROOT, dir), work, { recursive: true });
    const service = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'mastodon-web' },
      spec: { selector: mastodonWeb.spec.selector.matchLabels, ports: [{ name: 'http', port: 3000, targetPort: 'http' }] },
    };
    const out = spawnSync('sh', [path.join(work, 'post-render.sh')], { input: `${stringify(mastodonWeb)}---\n${stringify(service)}`, encoding: 'utf8' });
    expect(out.status, out.stderr).toBe(0);
    const objects = parseAllDocuments(out.stdout).map((d) => d.toJSON() as K8sObject);
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      'ConfigMap/mastodon-rategate',
      'Deployment/mastodon-web',
      'Service/mastodon-web',
    ]);
    for (const o of objects) expect(k8sErrors(o)).toEqual([]);
    const byKind = (k: string): K8sObject => objects.find((o) => o.kind === k)!;
    expect(byKind('ConfigMap').data['limits.yaml']).toBe(read('config/examples/mastodon.yaml'));
    expect(byKind('Service').spec.ports[0].targetPort).toBe('rategate');
    const containers = byKind('Deployment').spec.template.spec.containers as K8sObject[];
    expect(containers.map((c) => c.name).sort()).toEqual(['mastodon-web', 'rategate']);
    const puma = containers.find((c) => c.name === 'mastodon-web')!;
    expect(puma.env).toEqual(expect.arrayContaining([{ name: 'PORT', value: '3000' }, expect.objectContaining({ name: 'TRUSTED_PROXY_IP' })]));
    expect(puma.image).toBe('ghcr.io/mastodon/mastodon:v4.3.0');
  });
});

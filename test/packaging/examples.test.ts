/**
 * @module The chart's sidecar recipe for an existing chart (examples/mastodon-sidecar): its patch, applied
 * to a Deployment shaped as the Mastodon chart renders its web pod, gives a valid Deployment whose gateway
 * proxies to Puma over loopback, and its ConfigMap holds a table the gateway accepts.
 */
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse as parseYaml, parseAllDocuments, stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../src/config/index.js';
import { k8sErrors, type K8sObject } from './render.js';
import { read, ROOT } from './support.js';

/** kubectl's built-in kustomize runs the recipe for real where it is installed (it is not in Debian's archive). */
const kustomizeMissing = spawnSync('kubectl', ['kustomize', '--help'], { encoding: 'utf8' }).status !== 0;
if (kustomizeMissing)
  console.warn('SKIPPING the real post-render of the Mastodon sidecar recipe: kubectl (with kustomize) not found');

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
const policy = load('networkpolicy.yaml');
const podMonitor = load('podmonitor.yaml');
/** The recipe's table with its placeholder for the Ingress controller's pods filled in, as an operator does before the first run. */
const POD_RANGE = '10.244.0.0/16';
const filledIn = (text: string): string => text.replace('INGRESS_CONTROLLER_PODS', POD_RANGE);
/** A table without its trustedProxies line and the comment above it: the one place the recipe's differs from the example. */
const withoutTrustedProxies = (text: string): string => text.replace(/(^ {2}#.*\n)*^ {2}trustedProxies:.*\n/m, '');

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
            securityContext: { runAsUser: 991, runAsGroup: 991, runAsNonRoot: true },
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
  const byName = (
    list: K8sObject[],
    add: K8sObject[],
    merge?: (a: K8sObject, b: K8sObject) => K8sObject,
  ): K8sObject[] => {
    const merged = list.map((x) => {
      const y = add.find((a) => a.name === x.name);
      return y === undefined ? x : merge ? merge(x, y) : y;
    });
    return [...merged, ...add.filter((a) => !list.some((x) => x.name === a.name))];
  };
  const mergeContainer = (a: K8sObject, b: K8sObject): K8sObject => ({
    ...a,
    ...b,
    env: byName(a.env ?? [], b.env ?? []),
  });
  // (a strategic merge keeps every field of `a` the patch does not name, securityContext included)
  spec.containers = byName(spec.containers, p.spec.template.spec.containers, mergeContainer);
  spec.volumes = byName(spec.volumes ?? [], p.spec.template.spec.volumes);
  if (p.spec.template.spec.terminationGracePeriodSeconds !== undefined)
    spec.terminationGracePeriodSeconds = p.spec.template.spec.terminationGracePeriodSeconds;
  return out;
}

describe('the Mastodon sidecar recipe', () => {
  const patched = applyPatch(mastodonWeb, patch);
  const pod = patched.spec.template.spec;
  const gateway = pod.containers.find((c: K8sObject) => c.name === 'rategate');
  const env = (name: string): K8sObject | undefined => gateway.env.find((e: K8sObject) => e.name === name);

  it('patches the web Deployment and Service and ships the ConfigMap, by the names the Mastodon chart uses', () => {
    expect(kustomization.resources).toEqual(['helm-output.yaml', 'networkpolicy.yaml', 'podmonitor.yaml']);
    expect(generator).toEqual({
      name: 'mastodon-rategate',
      files: ['limits.yaml'],
      options: { disableNameSuffixHash: true },
    });
    expect(kustomization.patches).toEqual([
      { path: 'patch-web-deployment.yaml', target: { kind: 'Deployment', name: 'mastodon-web' } },
      { path: 'patch-web-service.yaml', target: { kind: 'Service', name: 'mastodon-web' } },
    ]);
    expect(read(`${dir}/post-render.sh`)).toMatch(/cat > "\$work\/helm-output\.yaml"[\s\S]*kubectl kustomize "\$work"/);
  });

  it('gives a Deployment and a ConfigMap that validate against the Kubernetes schemas', () => {
    expect(k8sErrors(patched)).toEqual([]);
    expect(k8sErrors(configMap)).toEqual([]);
    expect(k8sErrors(policy)).toEqual([]);
    expect(k8sErrors(podMonitor)).toEqual([]);
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
    const doc = parseYaml(filledIn(configMap.data['limits.yaml'] as string)) as {
      limits: { name: string; match: unknown }[];
    };
    const result = validateConfig(doc, {
      listen: env('RATEGATE_LISTEN')?.value,
      adminListen: env('RATEGATE_ADMIN_LISTEN')?.value,
      upstream: env('RATEGATE_UPSTREAM')?.value,
      store: 'redis://redis:6379',
    });
    expect(result.ok ? [] : result.errors).toEqual([]);
    expect(doc.limits.find((r) => r.name === 'api-media')?.match).toEqual(['POST /api/v1/media', 'POST /api/v2/media']);
  });

  it("is Mastodon's own table, the repository's config/examples/mastodon.yaml byte for byte but for who may set the client's address", () => {
    // Re-sync after a change to the example: copy config/examples/mastodon.yaml, keeping the recipe's trustedProxies lines.
    expect(withoutTrustedProxies(configMap.data['limits.yaml'] as string)).toBe(
      withoutTrustedProxies(read('config/examples/mastodon.yaml')),
    );
    const result = validateConfig(parseYaml(filledIn(configMap.data['limits.yaml'] as string)), {});
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
    const trusted = String(puma.env.find((e: K8sObject) => e.name === 'TRUSTED_PROXY_IP')?.value ?? '').split(
      /\s*,\s*|\s+/,
    );
    expect(trusted).toEqual(expect.arrayContaining(['127.0.0.1/8', '::1/128']));
    // The Ingress controller in front of the gateway is on a private address: still trusted, as by Rails' default.
    expect(trusted).toEqual(expect.arrayContaining(['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16']));
    expect(read('helm/rategate/README.md')).toMatch(
      /TRUSTED_PROXY_IP[\s\S]{0,600}RemoteIp|RemoteIp[\s\S]{0,600}TRUSTED_PROXY_IP/,
    );
  });
});

describe('the Mastodon sidecar recipe, made safe (issue 29)', () => {
  const patched = applyPatch(mastodonWeb, patch);
  const pod = patched.spec.template.spec;
  const puma = pod.containers.find((c: K8sObject) => c.name === 'mastodon-web');

  it('trusts the pod’s own loopback and the Ingress controller it is told, never the private ranges wholesale', () => {
    const table = parseYaml(read(`${dir}/limits.yaml`)) as K8sObject;
    expect(table.clients.trustedProxies).toEqual(['loopback', 'INGRESS_CONTROLLER_PODS']);
    expect((parseYaml(read('config/examples/mastodon.yaml')) as K8sObject).clients.trustedProxies).toEqual([
      'loopback',
    ]);
    // Left as shipped, the gateway refuses it (and post-render.sh refuses to run, below).
    const result = validateConfig(table, {});
    expect(result.ok ? [] : result.errors).toEqual([
      expect.stringContaining('clients.trustedProxies[1]: invalid trusted proxy "INGRESS_CONTROLLER_PODS"'),
    ]);
  });

  it('pauses Puma past the gateway’s pause and drain, inside the grace period, and keeps Puma’s own securityContext (uid 991)', () => {
    const pause = Number(puma.lifecycle.preStop.exec.command[1]);
    const gateway = pod.containers.find((c: K8sObject) => c.name === 'rategate');
    const gatewayPause = Number(gateway.lifecycle.preStop.exec.command[1]);
    expect(puma.lifecycle.preStop.exec.command[0]).toBe('sleep');
    expect(pause).toBeGreaterThanOrEqual(gatewayPause + 10);
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(pause);
    expect(puma.securityContext).toEqual({ runAsUser: 991, runAsGroup: 991, runAsNonRoot: true });
    expect(patch.spec.template.spec).not.toHaveProperty('securityContext');
    expect(patch.spec.template.spec.containers.find((c: K8sObject) => c.name === 'mastodon-web')).not.toHaveProperty(
      'securityContext',
    );
  });

  it('closes Puma’s port to all but the gateway (loopback) and opens the admin port to the monitoring namespace only', () => {
    const selects = Object.entries(policy.spec.podSelector.matchLabels as Record<string, string>).every(
      ([k, v]) => mastodonWeb.spec.template.metadata.labels[k] === v,
    );
    expect(selects).toBe(true);
    expect(policy.spec.policyTypes).toEqual(['Ingress']);
    const rules = policy.spec.ingress as K8sObject[];
    const opened = rules.flatMap((r) => (r.ports as K8sObject[]).map((p) => p.port));
    expect(opened).toEqual(['rategate', 'rategate-admin']);
    expect(opened).not.toContain('http');
    expect(opened).not.toContain(3000);
    expect(rules[1]!.from).toEqual([
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } },
    ]);
    const gatewayPorts = pod.containers
      .find((c: K8sObject) => c.name === 'rategate')
      .ports.map((p: K8sObject) => p.name);
    for (const name of opened) expect(gatewayPorts).toContain(name);
  });

  it('has a PodMonitor scraping each web pod’s gateway on its admin port', () => {
    expect(podMonitor.spec.selector.matchLabels).toEqual(policy.spec.podSelector.matchLabels);
    expect(podMonitor.spec.podMetricsEndpoints).toEqual([
      expect.objectContaining({ port: 'rategate-admin', path: '/metrics' }),
    ]);
  });

  /** Runs post-render.sh from a copy of the recipe, with a stand-in `kubectl` that records the folder it was given. */
  function runPostRender(edit: (dir: string) => void): {
    status: number | null;
    stdout: string;
    stderr: string;
    recipe: string;
    kustomized: string;
  } {
    const work = mkdtempSync(path.join(os.tmpdir(), 'rategate-recipe-'));
    const recipe = path.join(work, 'recipe');
    cpSync(path.join(ROOT, dir), recipe, { recursive: true });
    edit(recipe);
    const bin = path.join(work, 'bin');
    mkdirSync(bin);
    const seen = path.join(work, 'kustomized');
    writeFileSync(
      path.join(bin, 'kubectl'),
      `#!/bin/sh
# kubectl kustomize DIR: note DIR and what it holds, print the rendered input back
echo "$2" > ${seen}; ls "$2" >> ${seen}; cat "$2/helm-output.yaml"
`,
    );
    chmodSync(path.join(bin, 'kubectl'), 0o755);
    const out = spawnSync('sh', [path.join(recipe, 'post-render.sh')], {
      input: 'kind: Secret\ndata: { password: c2VjcmV0 }\n',
      encoding: 'utf8',
      env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
    });
    return {
      status: out.status,
      stdout: out.stdout,
      stderr: out.stderr,
      recipe,
      kustomized: existsSync(seen) ? readFileSync(seen, 'utf8') : '',
    };
  }

  it('post-render.sh leaves no rendered output on disk: it kustomizes in a temporary folder it removes', () => {
    const r = runPostRender((recipe) =>
      writeFileSync(path.join(recipe, 'limits.yaml'), filledIn(readFileSync(path.join(recipe, 'limits.yaml'), 'utf8'))),
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('c2VjcmV0');
    const [folder, ...files] = r.kustomized.trim().split('\n');
    expect(folder).not.toBe(r.recipe);
    expect(files.sort()).toEqual([
      'helm-output.yaml',
      'kustomization.yaml',
      'limits.yaml',
      'networkpolicy.yaml',
      'patch-web-deployment.yaml',
      'patch-web-service.yaml',
      'podmonitor.yaml',
    ]);
    expect(existsSync(folder!)).toBe(false);
    expect(readdirSync(r.recipe)).not.toContain('helm-output.yaml');
    expect(read('.gitignore')).toContain('helm/rategate/examples/mastodon-sidecar/helm-output.yaml');
  });

  it('post-render.sh refuses to run until the Ingress controller’s pods are named', () => {
    const r = runPostRender(() => undefined);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/edit clients\.trustedProxies in .*limits\.yaml first: replace INGRESS_CONTROLLER_PODS/);
    expect(r.kustomized).toBe('');
    expect(readdirSync(r.recipe)).not.toContain('helm-output.yaml');
  });
});

describe.skipIf(kustomizeMissing)(
  'the Mastodon sidecar recipe, run for real (post-render.sh → kubectl kustomize)',
  () => {
    it('turns the Mastodon chart’s web Deployment and Service into valid objects with the gateway, its table and TRUSTED_PROXY_IP', () => {
      const work = mkdtempSync(path.join(os.tmpdir(), 'rategate-recipe-'));
      cpSync(path.join(ROOT, dir), work, { recursive: true });
      writeFileSync(path.join(work, 'limits.yaml'), filledIn(read(`${dir}/limits.yaml`)));
      const service = {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 'mastodon-web' },
        spec: {
          selector: mastodonWeb.spec.selector.matchLabels,
          ports: [{ name: 'http', port: 3000, targetPort: 'http' }],
        },
      };
      const out = spawnSync('sh', [path.join(work, 'post-render.sh')], {
        input: `${stringify(mastodonWeb)}---\n${stringify(service)}`,
        encoding: 'utf8',
      });
      expect(out.status, out.stderr).toBe(0);
      const objects = parseAllDocuments(out.stdout).map((d) => d.toJSON() as K8sObject);
      expect(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
        'ConfigMap/mastodon-rategate',
        'Deployment/mastodon-web',
        'NetworkPolicy/mastodon-web-rategate',
        'PodMonitor/mastodon-web-rategate',
        'Service/mastodon-web',
      ]);
      for (const o of objects) expect(k8sErrors(o)).toEqual([]);
      const byKind = (k: string): K8sObject => objects.find((o) => o.kind === k)!;
      expect(byKind('ConfigMap').data['limits.yaml']).toBe(filledIn(read(`${dir}/limits.yaml`)));
      expect(byKind('Service').spec.ports[0].targetPort).toBe('rategate');
      const containers = byKind('Deployment').spec.template.spec.containers as K8sObject[];
      expect(containers.map((c) => c.name).sort()).toEqual(['mastodon-web', 'rategate']);
      const puma = containers.find((c) => c.name === 'mastodon-web')!;
      expect(puma.env).toEqual(
        expect.arrayContaining([
          { name: 'PORT', value: '3000' },
          expect.objectContaining({ name: 'TRUSTED_PROXY_IP' }),
        ]),
      );
      expect(puma.image).toBe('ghcr.io/mastodon/mastodon:v4.3.0');
    });
  },
);

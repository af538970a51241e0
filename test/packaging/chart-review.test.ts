/**
 * @module Issue 29's review of the chart, by test: rendered in each mode an operator uses (behind an
 * Ingress controller, a LoadBalancer, a NodePort, as a sidecar, on Sentinel, with the store URL in a
 * Secret), every render is checked for who may set the client's address, the store ports the
 * NetworkPolicy opens, secrets kept out of every ConfigMap, the preStop pauses of both containers,
 * the app port closed to all but the gateway, and the replica count the local fallback divides by.
 */
import { Ajv } from 'ajv';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { find, k8sErrors, render, rendererUnavailable, renderError, type K8sObject, type Rendered } from './render.js';
import { read } from './support.js';

const describeRendered = describe.skipIf(rendererUnavailable !== null);

const API = { upstream: { url: 'http://mastodon-web.social.svc:3000' } };
const CONTROLLER = { clients: { trustedProxies: ['10.244.0.0/16'] } };
const APP = { mode: 'sidecar', app: { image: { repository: 'ghcr.io/mastodon/mastodon', tag: 'v4.3.0' }, port: 3000 } };
const SENTINEL_URL = 'redis-sentinel://sentinel-0.redis:26379,sentinel-1.redis:26380/mymaster';
const SECRET_WORDS = ['s3ntinel-secret-29', 'admin-secret-29'];

/** The modes of the review, each a values overlay an operator would write. */
const MODES: [string, object][] = [
  ['behind an Ingress controller', { ...API, ingress: { enabled: true, className: 'nginx' }, config: CONTROLLER }],
  ['as a LoadBalancer', { ...API, service: { type: 'LoadBalancer' } }],
  ['as a NodePort', { ...API, service: { type: 'NodePort' } }],
  ['as a sidecar', { ...APP, config: CONTROLLER }],
  [
    'on Sentinel with both secrets, three replicas and every policy',
    {
      ...API,
      replicaCount: 3,
      config: CONTROLLER,
      store: { url: SENTINEL_URL, sentinelPassword: SECRET_WORDS[0] },
      admin: { token: SECRET_WORDS[1] },
      networkPolicy: { enabled: true, admin: { namespaces: ['monitoring'] } },
      configCheck: { enabled: true },
    },
  ],
  [
    'as a sidecar with the store URL in a Secret and the HPA',
    {
      ...APP,
      config: CONTROLLER,
      store: { existingSecret: 'rategate-store' },
      autoscaling: { enabled: true, maxReplicas: 6 },
      networkPolicy: {
        enabled: true,
        admin: { namespaces: ['monitoring'] },
        egress: { app: [{ ports: [{ port: 5432 }] }] },
      },
    },
  ],
];

const limitsOf = (r: Rendered, name = 'edge-rategate'): K8sObject =>
  parseYaml(find(r, 'ConfigMap', name).data['limits.yaml'] as string) as K8sObject;
const containers = (r: Rendered): K8sObject[] => find(r, 'Deployment').spec.template.spec.containers as K8sObject[];
const envOf = (c: K8sObject, name: string): K8sObject | undefined =>
  (c.env as K8sObject[] | undefined)?.find((e) => e.name === name);
const egressPorts = (r: Rendered): number[][] =>
  (find(r, 'NetworkPolicy').spec.egress as K8sObject[]).map((e) => (e.ports as K8sObject[]).map((p) => p.port));

describeRendered('the chart, reviewed in each mode', () => {
  describe.each(MODES)('%s', (_name, values) => {
    const r = render(values);

    it('renders objects that validate against the Kubernetes schemas, from values the chart’s schema accepts', () => {
      expect(r.manifests.flatMap((m) => k8sErrors(m.object))).toEqual([]);
      const check = new Ajv({
        allErrors: true,
        strictTypes: false,
        strictRequired: false,
        allowUnionTypes: true,
      }).compile(JSON.parse(read('helm/rategate/values.schema.json')));
      expect(check(r.values) ? [] : check.errors).toEqual([]);
    });

    it('says who may set the client’s address: named proxies, or clients connecting directly with their own address', () => {
      const service = find(r, 'Service', 'edge-rategate').spec;
      const named = limitsOf(r).clients?.trustedProxies as string[] | undefined;
      if (named === undefined) {
        expect(['LoadBalancer', 'NodePort']).toContain(service.type);
        expect(service.externalTrafficPolicy).toBe('Local');
        expect(r.notes).toMatch(/externalTrafficPolicy Local: clients connect directly[\s\S]*source-NAT/);
      } else {
        expect(named).not.toContain('private');
        expect(r.notes).toContain(`config.clients.trustedProxies: ${JSON.stringify(named)}`);
      }
    });

    it('keeps every secret out of every ConfigMap (the limits and the check hook’s) and every other object but Secrets', () => {
      for (const { object } of r.manifests) {
        if (object.kind === 'Secret') continue;
        for (const word of SECRET_WORDS)
          expect(JSON.stringify(object), `${object.kind} ${object.metadata.name}`).not.toContain(word);
      }
      expect(r.notes).not.toMatch(new RegExp(SECRET_WORDS.join('|')));
    });

    it('pauses the gateway before SIGTERM, and in sidecar mode the app until the gateway has drained', () => {
      const [gateway, app] = containers(r);
      expect(gateway!.lifecycle.preStop.exec.command).toEqual(['sleep', '5']);
      if (app !== undefined) {
        expect(app.lifecycle.preStop.exec.command).toEqual(['sleep', '15']);
        expect(find(r, 'Deployment').spec.template.spec.terminationGracePeriodSeconds).toBeGreaterThan(15);
      }
    });

    it('with a NetworkPolicy, opens the proxy port to all, the admin port to monitoring only, and never the app’s port', () => {
      const np = r.manifests.find((m) => m.object.kind === 'NetworkPolicy')?.object;
      if (np === undefined) return expect((values as { networkPolicy?: unknown }).networkPolicy).toBeUndefined();
      const rules = np.spec.ingress as K8sObject[];
      expect(rules.flatMap((rule) => (rule.ports as K8sObject[]).map((p) => p.port))).toEqual(['http', 'admin']);
      expect(rules[1]!.from).toEqual([
        { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } },
      ]);
    });
  });
});

describeRendered('who may set the client’s address', () => {
  it('is required behind an Ingress controller and for a ClusterIP Service, with the reason in the refusal', () => {
    expect(renderError({ ...API, ingress: { enabled: true } })).toMatch(
      /ingress\.enabled: the Ingress controller connects to the gateway, so config\.clients\.trustedProxies must name/,
    );
    expect(renderError(API)).toMatch(/config\.clients\.trustedProxies must name what connects to the gateway/);
    expect(renderError({ ...APP })).toMatch(/config\.clients\.trustedProxies must name/);
    // Said explicitly, even as loopback only, it is accepted.
    expect(
      limitsOf(render({ ...API, config: { clients: { trustedProxies: ['loopback'] } } })).clients.trustedProxies,
    ).toEqual(['loopback']);
  });

  it('behind a LoadBalancer or NodePort sets externalTrafficPolicy Local, and refuses Cluster (source NAT) unless proxies are named', () => {
    for (const type of ['LoadBalancer', 'NodePort']) {
      expect(find(render({ ...API, service: { type } }), 'Service', 'edge-rategate').spec.externalTrafficPolicy).toBe(
        'Local',
      );
      expect(renderError({ ...API, service: { type, externalTrafficPolicy: 'Cluster' } })).toMatch(
        /externalTrafficPolicy Cluster source-NATs every client/,
      );
      const named = render({ ...API, service: { type, externalTrafficPolicy: 'Cluster' }, config: CONTROLLER });
      expect(find(named, 'Service', 'edge-rategate').spec.externalTrafficPolicy).toBe('Cluster');
    }
    expect(find(render({ ...API, config: CONTROLLER }), 'Service', 'edge-rategate').spec).not.toHaveProperty(
      'externalTrafficPolicy',
    );
  });

  it('warns in NOTES when `private` is trusted wholesale', () => {
    expect(render({ ...API, config: { clients: { trustedProxies: ['loopback', 'private'] } } }).notes).toMatch(
      /WARNING: "private" trusts every pod/,
    );
  });
});

describeRendered('Sentinel under the NetworkPolicy', () => {
  const policy = { networkPolicy: { enabled: true } };

  it('opens every sentinel’s port and the data port the sentinels hand out, and says to check it', () => {
    const r = render({ ...API, ...policy, config: CONTROLLER, store: { url: SENTINEL_URL } });
    expect(egressPorts(r).at(-1)).toEqual([26379, 26380, 6379]);
    expect(r.notes).toMatch(
      /Store ports opened: 26379, 26380, 6379 \(the sentinels' ports from store\.url, and 6379 for the\s+master they hand out\)\. CHECK/,
    );
    // A Sentinel URL without ports: the sentinels' default port.
    expect(
      egressPorts(render({ ...API, ...policy, config: CONTROLLER, store: { url: 'redis-sentinel://s1,s2/m' } })).at(-1),
    ).toEqual([26379, 6379]);
  });

  it('opens both Redis’s and Sentinel’s default ports when the URL is in a Secret, and says it guessed', () => {
    const r = render({ ...API, ...policy, config: CONTROLLER, store: { existingSecret: 'rategate-store' } });
    expect(egressPorts(r).at(-1)).toEqual([6379, 26379]);
    expect(r.notes).toMatch(
      /Store ports opened: 6379, 26379 \(a guess: the store URL is in a Secret the chart cannot read/,
    );
  });

  it('opens exactly networkPolicy.egress.storePorts when given', () => {
    const r = render({
      ...API,
      networkPolicy: { enabled: true, egress: { storePorts: [26379, 6380] } },
      config: CONTROLLER,
      store: { url: SENTINEL_URL },
    });
    expect(egressPorts(r).at(-1)).toEqual([26379, 6380]);
    expect(r.notes).toMatch(/Store ports opened: 26379, 6380 \(networkPolicy\.egress\.storePorts\)/);
  });
});

describeRendered('the sentinels’ password', () => {
  it('is kept in the chart’s Secret and reaches the gateway as RATEGATE_STORE_SENTINEL_PASSWORD, rolling the pods when it changes', () => {
    const r = render({ ...API, config: CONTROLLER, store: { url: SENTINEL_URL, sentinelPassword: 'pw-1' } });
    const secret = find(r, 'Secret', 'edge-rategate-store');
    expect(Buffer.from(secret.data['sentinel-password'], 'base64').toString()).toBe('pw-1');
    expect(envOf(containers(r)[0]!, 'RATEGATE_STORE_SENTINEL_PASSWORD')?.valueFrom).toEqual({
      secretKeyRef: { name: 'edge-rategate-store', key: 'sentinel-password' },
    });
    const sum = (x: Rendered): string =>
      find(x, 'Deployment').spec.template.metadata.annotations['checksum/restart-settings'];
    expect(
      sum(render({ ...API, config: CONTROLLER, store: { url: SENTINEL_URL, sentinelPassword: 'pw-2' } })),
    ).not.toBe(sum(r));
  });

  it('comes from a Secret of the operator’s, and the chart makes none', () => {
    const r = render({
      ...API,
      config: CONTROLLER,
      store: { url: SENTINEL_URL, sentinelPasswordSecret: 'redis-auth', sentinelPasswordSecretKey: 'sentinel' },
    });
    expect(r.manifests.filter((m) => m.object.kind === 'Secret')).toEqual([]);
    expect(envOf(containers(r)[0]!, 'RATEGATE_STORE_SENTINEL_PASSWORD')?.valueFrom).toEqual({
      secretKeyRef: { name: 'redis-auth', key: 'sentinel' },
    });
  });

  it('is refused in config, where it would land in both ConfigMaps in clear', () => {
    expect(renderError({ ...API, config: { ...CONTROLLER, store: { sentinelPassword: 'in-clear' } } })).toMatch(
      /config\.store\.sentinelPassword would put the sentinels' password in the ConfigMaps/,
    );
  });
});

describeRendered('the sidecar’s app container', () => {
  const r = render({
    ...APP,
    config: CONTROLLER,
    app: { ...APP.app, securityContext: { runAsUser: 991, runAsGroup: 991 } },
  });
  const pod = find(r, 'Deployment').spec.template.spec;

  it('runs as its own image’s user: the pod sets no runAsUser, runAsGroup or fsGroup; the gateway keeps 10001 on its container', () => {
    expect(pod.securityContext).toEqual({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(pod.containers[0].securityContext).toMatchObject({ runAsUser: 10001, runAsGroup: 10001 });
    expect(pod.containers[1].securityContext).toEqual({ runAsUser: 991, runAsGroup: 991 });
    const fs = render({ ...APP, config: CONTROLLER, app: { ...APP.app, podSecurityContext: { fsGroup: 991 } } });
    expect(find(fs, 'Deployment').spec.template.spec.securityContext).toMatchObject({
      fsGroup: 991,
      runAsNonRoot: true,
    });
    // Ingress mode keeps the hardened pod-level defaults.
    expect(find(render({ ...API, config: CONTROLLER }), 'Deployment').spec.template.spec.securityContext).toMatchObject(
      { runAsUser: 10001, fsGroup: 10001 },
    );
  });

  it('pauses app.preStopSleepSeconds when set, takes app.lifecycle whole, and refuses a grace period the pause does not fit in', () => {
    const app = (values: object): K8sObject => containers(render({ ...APP, config: CONTROLLER, ...values }))[1]!;
    expect(app({ app: { ...APP.app, preStopSleepSeconds: 20 } }).lifecycle.preStop.exec.command).toEqual([
      'sleep',
      '20',
    ]);
    expect(app({ app: { ...APP.app, preStopSleepSeconds: 0 } })).not.toHaveProperty('lifecycle');
    expect(
      app({ app: { ...APP.app, lifecycle: { preStop: { httpGet: { path: '/drain', port: 3000 } } } } }).lifecycle,
    ).toEqual({
      preStop: { httpGet: { path: '/drain', port: 3000 } },
    });
    // Left empty, the grace period is derived from the longer pause; set by hand, it must fit the pause.
    const longPause = render({ ...APP, config: CONTROLLER, app: { ...APP.app, preStopSleepSeconds: 40 } });
    expect(find(longPause, 'Deployment').spec.template.spec.terminationGracePeriodSeconds).toBe(40 + 15);
    expect(
      renderError({
        ...APP,
        config: CONTROLLER,
        app: { ...APP.app, preStopSleepSeconds: 40 },
        terminationGracePeriodSeconds: 30,
      }),
    ).toMatch(/terminationGracePeriodSeconds \(30\) must exceed the app's preStop pause \(40 s\)/);
  });

  it('is not reachable on its port: the Service and the NetworkPolicy carry only the gateway’s', () => {
    const np = find(render({ ...APP, config: CONTROLLER, networkPolicy: { enabled: true } }), 'NetworkPolicy').spec;
    expect((np.ingress as K8sObject[]).flatMap((rule) => (rule.ports as K8sObject[]).map((p) => p.port))).toEqual([
      'http',
    ]);
    expect(find(r, 'Service', 'edge-rategate').spec.ports.map((p: K8sObject) => p.targetPort)).toEqual(['http']);
  });
});

describeRendered('store.gateways, the share of the local fallback', () => {
  const gateways = (values: object): unknown =>
    limitsOf(render({ ...API, config: CONTROLLER, ...values })).store?.gateways;

  it('follows replicaCount, or maxReplicas with the HPA, with a shared store; the operator’s value wins; memory needs none', () => {
    const redis = { store: { url: 'redis://redis:6379' } };
    expect(gateways({ ...redis, replicaCount: 3 })).toBe(3);
    expect(gateways({ ...redis, autoscaling: { enabled: true, minReplicas: 2, maxReplicas: 8 } })).toBe(8);
    expect(gateways({ store: { existingSecret: 'rategate-store' }, replicaCount: 4 })).toBe(4);
    expect(gateways({ ...redis, replicaCount: 3, config: { ...CONTROLLER, store: { gateways: 5 } } })).toBe(5);
    expect(gateways({ replicaCount: 1 })).toBeUndefined();
    // The check hook validates the same text the pods load.
    const r = render({ ...API, config: CONTROLLER, ...redis, replicaCount: 3 });
    expect(limitsOf(r, 'edge-rategate-check')).toEqual(limitsOf(r));
    expect(r.notes).toMatch(/store\.gateways: 3 \(replicaCount\)/);
  });

  it('is a restart setting: changing replicaCount with a shared store rolls the pods so the new share applies', () => {
    const sum = (n: number): string =>
      find(render({ ...API, config: CONTROLLER, store: { url: 'redis://redis:6379' }, replicaCount: n }), 'Deployment')
        .spec.template.metadata.annotations['checksum/restart-settings'];
    expect(sum(3)).not.toBe(sum(4));
  });
});

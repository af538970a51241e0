/**
 * @module The chart, rendered for real: runs the Go renderer (scripts/helm-render, Helm's engine semantics)
 * and validates each rendered object against the Kubernetes schemas of `kubernetes-models` and
 * `@kubernetes-models/prometheus-operator`.
 *
 * The renderer is built once by `.ci/run` (scripts/helm-render/build.sh). Under CI a missing binary is an
 * error, never a skip; elsewhere it is (re)built on demand when Go is there, and the chart tests skip
 * with a message when it cannot be.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { ConfigMap, Pod, Secret, Service, ServiceAccount } from 'kubernetes-models/v1';
import { Deployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { Job } from 'kubernetes-models/batch/v1';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import {
  PodMonitor,
  PrometheusRule,
  ServiceMonitor,
} from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { CHART, ROOT } from './support.js';

export const RENDERER = `${ROOT}.build/helm-render`;
const SOURCE = `${ROOT}scripts/helm-render/main.go`;

/** Why the renderer is unavailable (null when it is ready). Throws under CI: a missing renderer must fail. */
function prepare(): string | null {
  const built = existsSync(RENDERER);
  if (process.env.CI === 'true') {
    if (!built) throw new Error(`${RENDERER} is missing: .ci/run builds it (scripts/helm-render/build.sh)`);
    return null;
  }
  if (built && statSync(RENDERER).mtimeMs >= statSync(SOURCE).mtimeMs) return null;
  const build = spawnSync(`${ROOT}scripts/helm-render/build.sh`, { encoding: 'utf8' });
  return build.status === 0
    ? null
    : `cannot build the chart renderer (needs Debian's golang-go and sprig): ${build.stderr}`;
}

export const rendererUnavailable = prepare();

export type K8sObject = Record<string, any>;
export interface Manifest {
  readonly source: string;
  readonly object: K8sObject;
}
export interface Rendered {
  /** The values the chart rendered with: the overrides coalesced over values.yaml. */
  readonly values: K8sObject;
  readonly notes: string;
  readonly manifests: Manifest[];
}

export interface RenderOptions {
  readonly chart?: string;
  readonly release?: string;
  readonly namespace?: string;
}

function args(options: RenderOptions): string[] {
  return [
    '--json',
    '--release',
    options.release ?? 'edge',
    '--namespace',
    options.namespace ?? 'social',
    '-f',
    '-',
    options.chart ?? CHART,
  ];
}

/** Renders the chart with `overrides` laid over values.yaml; throws with Helm's error text on failure. */
export function render(overrides: object = {}, options: RenderOptions = {}): Rendered {
  const out = spawnSync(RENDERER, args(options), {
    input: JSON.stringify(overrides),
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  if (out.status !== 0) throw new Error(out.stderr.trim() || `helm-render exited ${out.status}`);
  return JSON.parse(out.stdout) as Rendered;
}

/** The error text of a render that must fail (throws when it succeeds). */
export function renderError(overrides: object, options: RenderOptions = {}): string {
  try {
    execFileSync(RENDERER, args(options), {
      input: JSON.stringify(overrides),
      encoding: 'utf8',
      stdio: ['pipe', 'pipe', 'pipe'],
    });
  } catch (err) {
    return String((err as { stderr?: string }).stderr ?? err);
  }
  throw new Error('the render succeeded');
}

interface Model {
  validate(): void;
}
type ModelClass = new (data: K8sObject) => Model;
const MODELS: Record<string, ModelClass> = {
  'v1/ConfigMap': ConfigMap as unknown as ModelClass,
  'v1/Pod': Pod as unknown as ModelClass,
  'v1/Secret': Secret as unknown as ModelClass,
  'v1/Service': Service as unknown as ModelClass,
  'v1/ServiceAccount': ServiceAccount as unknown as ModelClass,
  'apps/v1/Deployment': Deployment as unknown as ModelClass,
  'batch/v1/Job': Job as unknown as ModelClass,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler as unknown as ModelClass,
  'networking.k8s.io/v1/Ingress': Ingress as unknown as ModelClass,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy as unknown as ModelClass,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget as unknown as ModelClass,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor as unknown as ModelClass,
  'monitoring.coreos.com/v1/PodMonitor': PodMonitor as unknown as ModelClass,
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule as unknown as ModelClass,
};

/**
 * Fields the schema does not declare. The schemas leave objects open (the API server drops an unknown
 * field with a warning, so a misspelt `readinesProbe` would silently do nothing); the compiled validator
 * does read every declared property of an object it checks, so the validator runs on proxies that record
 * those reads, and an own key never read is unknown. Objects the validator iterates (maps: labels, data…)
 * or never looks into (free-form fields) are left out.
 */
function unknownFields(Model: ModelClass, object: K8sObject): string[] {
  const reads = new Map<object, { path: string; keys: Set<PropertyKey>; iterated: boolean }>();
  const wrap = (value: unknown, path: string): unknown => {
    if (value === null || typeof value !== 'object') return value;
    let entry = reads.get(value);
    if (entry === undefined) reads.set(value, (entry = { path, keys: new Set(), iterated: false }));
    const seen = entry;
    return new Proxy(value, {
      get: (t, k, r) => {
        seen.keys.add(k);
        return wrap(Reflect.get(t, k, r), `${path}/${String(k)}`);
      },
      has: (t, k) => {
        seen.keys.add(k);
        return Reflect.has(t, k);
      },
      ownKeys: (t) => {
        seen.iterated = true;
        return Reflect.ownKeys(t);
      },
    });
  };
  const validate = (Model.prototype as Model).validate;
  validate.call(wrap(object, '') as Model);
  const unknown: string[] = [];
  for (const [target, { path, keys, iterated }] of reads) {
    if (Array.isArray(target) || iterated || keys.size === 0) continue;
    for (const key of Object.keys(target)) if (!keys.has(key)) unknown.push(`${path}/${key}`);
  }
  return unknown;
}

/** Schema violations of one object (empty when valid); an apiVersion/kind without a schema is one. */
export function k8sErrors(object: K8sObject): string[] {
  const type = `${String(object.apiVersion)}/${String(object.kind)}`;
  const Model = MODELS[type];
  if (Model === undefined) return [`no schema for ${type}`];
  const errors: string[] = [];
  try {
    new Model(object).validate();
    for (const field of unknownFields(Model, object))
      errors.push(`${type} ${String(object.metadata?.name)}: unknown field ${field}`);
  } catch (err) {
    errors.push(`${type} ${String(object.metadata?.name)}: ${(err as Error).message}`);
  }
  // The schemas do not require these, the API server does.
  const name = object.metadata?.name;
  if (typeof name !== 'string' || !/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(name))
    errors.push(`${type}: invalid metadata.name ${String(name)}`);
  if (['Service', 'Deployment', 'Pod'].includes(String(object.kind)) && String(name).length > 63)
    errors.push(`${type} ${name}: name longer than 63`);
  return errors;
}

/** The one object of a kind (and name, when several), failing loudly when absent. */
export function find(rendered: Rendered, kind: string, name?: string): K8sObject {
  const found = rendered.manifests.filter(
    (m) => m.object.kind === kind && (name === undefined || m.object.metadata?.name === name),
  );
  if (found.length !== 1) throw new Error(`expected one ${kind}${name ? ` ${name}` : ''}, found ${found.length}`);
  return found[0]!.object;
}

export const kinds = (rendered: Rendered): string[] => rendered.manifests.map((m) => String(m.object.kind)).sort();

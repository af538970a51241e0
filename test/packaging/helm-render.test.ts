/**
 * @module The chart renderer itself (scripts/helm-render): on a small chart written here, it shows the
 * Helm semantics the chart tests rely on, quirks included, so a renderer bug cannot pass for a chart bug.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { render, rendererUnavailable, renderError } from './render.js';

function chart(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'helm-render-'));
  dirs.push(dir);
  const all = {
    'Chart.yaml': 'apiVersion: v2\nname: demo\nversion: 1.2.3\nappVersion: "4.5"\nkubeVersion: ">=1.23.0-0"\n',
    ...files,
  };
  for (const [name, text] of Object.entries(all)) {
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return dir;
}
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

const VALUES = `
name: base
replicas: 2
big: 1000000
nested: { keep: 1, drop: 2, deep: { a: 1 } }
list: [b, a]
`;

describe.skipIf(rendererUnavailable !== null)('helm-render', () => {
  const dir = chart({
    'values.yaml': VALUES,
    'files/greeting.txt': 'hello from a file\n',
    'templates/_helpers.tpl': '{{- define "demo.name" -}}{{ .Release.Name }}-{{ .Chart.Name }}{{- end }}',
    'templates/NOTES.txt': 'installed {{ include "demo.name" . }}',
    'templates/cm.yaml': `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "demo.name" . }}
  namespace: {{ .Release.Namespace }}
data:
  replicas: {{ .Values.replicas | quote }}
  big: "{{ .Values.big }}"
  missing: "{{ .Values.nothing }}"
  tpl: {{ tpl "{{ .Values.name }}-tpl" . | quote }}
  file: {{ .Files.Get "files/greeting.txt" | trim | quote }}
  kube: {{ .Capabilities.KubeVersion.Version | quote }}
  app: {{ .Chart.AppVersion | quote }}
  nested: {{ toJson .Values.nested | quote }}
  yaml: |
    {{- toYaml (dict "z" 1 "a" (list 1 2)) | nindent 4 }}
  fromYaml: {{ (fromYaml "k: v").k | quote }}
  service: {{ .Release.Service | quote }}
---
# only a comment: dropped
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: second
`,
  });

  it('renders each document with .Release, .Chart, .Capabilities, .Files, include, tpl, toYaml and toJson', () => {
    const r = render(
      { name: 'over', nested: { drop: null, deep: { b: 2 } } },
      { chart: dir, release: 'rel', namespace: 'ns' },
    );
    expect(r.manifests.map((m) => m.object.metadata.name)).toEqual(['rel-demo', 'second']);
    expect(r.manifests[0]?.source).toBe('demo/templates/cm.yaml');
    expect(r.manifests[0]?.object.data).toEqual({
      replicas: '2',
      // Helm reads values through JSON: every number is a float64, and a large one prints as 1e+06.
      big: '1e+06',
      // missingkey=zero, and Helm's "<no value>" clean-up.
      missing: '',
      tpl: 'over-tpl',
      file: 'hello from a file',
      kube: 'v1.30.0',
      app: '4.5',
      // User values are merged deeply over values.yaml, and a null deletes the default.
      nested: '{"deep":{"a":1,"b":2},"keep":1}',
      yaml: 'a:\n- 1\n- 2\nz: 1\n',
      fromYaml: 'v',
      service: 'Helm',
    });
    expect(r.notes).toBe('installed rel-demo');
    expect(r.values.name).toBe('over');
  });

  it('fails as Helm does: required, fail, env (removed from sprig), bad YAML, an incompatible kubeVersion', () => {
    const required = chart({ 'templates/a.yaml': 'a: {{ required "x is required" .Values.x }}\n' });
    expect(renderError({}, { chart: required })).toMatch(/x is required/);
    expect(render({ x: 'set' }, { chart: required }).manifests[0]?.object).toEqual({ a: 'set' });
    expect(renderError({}, { chart: chart({ 'templates/a.yaml': '{{ fail "stop here" }}' }) })).toMatch(/stop here/);
    // A path through a missing map is an error in Helm too, not an empty string.
    expect(renderError({}, { chart: chart({ 'templates/a.yaml': 'a: {{ .Values.nothing.here }}' }) })).toMatch(
      /nil pointer evaluating interface \{\}\.here/,
    );
    expect(renderError({}, { chart: chart({ 'templates/a.yaml': 'a: {{ env "HOME" }}' }) })).toMatch(
      /function "env" not defined/,
    );
    expect(renderError({}, { chart: chart({ 'templates/a.yaml': 'a: b\n c: d\n' }) })).toMatch(
      /YAML parse error on demo\/templates\/a\.yaml/,
    );
    const old = chart({
      'Chart.yaml': 'apiVersion: v2\nname: demo\nversion: 1.0.0\nkubeVersion: ">=1.99.0"\n',
      'templates/a.yaml': 'a: b\n',
    });
    expect(renderError({}, { chart: old })).toMatch(/incompatible with Kubernetes v1\.30\.0/);
  });

  it('parses YAML 1.1 scalars as the API server does: an unquoted yes is a boolean', () => {
    const r = render({}, { chart: chart({ 'templates/a.yaml': 'a: yes\nb: "yes"\nc: 010\n' }) });
    expect(r.manifests[0]?.object).toEqual({ a: true, b: 'yes', c: 8 });
  });
});

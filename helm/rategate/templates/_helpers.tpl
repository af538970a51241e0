{{/*
Names and labels, after the podinfo and bitnami charts.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "rategate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The fully qualified app name: release-chart, truncated to the 63 characters a DNS label allows.
A release name that already contains the chart name is used as is.
*/}}
{{- define "rategate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* chart-version, as the helm.sh/chart label wants it. */}}
{{- define "rategate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every resource. */}}
{{- define "rategate.labels" -}}
helm.sh/chart: {{ include "rategate.chart" . }}
{{ include "rategate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: {{ .Values.mode }}
{{- end }}

{{/* Labels that select the pods: never change them between releases (Deployment selectors are immutable). */}}
{{- define "rategate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rategate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The ServiceAccount to use. */}}
{{- define "rategate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "rategate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The gateway image: repository@digest, or repository:tag with the tag defaulting to appVersion. */}}
{{- define "rategate.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* Where allowed requests go: the app container on loopback in sidecar mode, upstream.url otherwise. */}}
{{- define "rategate.upstream" -}}
{{- if eq .Values.mode "sidecar" }}
{{- printf "http://127.0.0.1:%d" (int .Values.app.port) }}
{{- else }}
{{- .Values.upstream.url }}
{{- end }}
{{- end }}

{{/* limits.yaml as the chart renders it: the ConfigMap's and the pre-upgrade check's, one text. */}}
{{- define "rategate.limitsYaml" -}}
# Rendered by the rategate chart from .Values.limits and .Values.config. Listen addresses, the
# upstream and the store come from the pod's environment (RATEGATE_*), which wins over this file.
{{ toYaml (merge (dict "limits" .Values.limits) (deepCopy (.Values.config | default dict))) }}
{{- end }}

{{/* Inside the pod the limit table lives here; the ConfigMap is mounted on the directory. */}}
{{- define "rategate.configDir" -}}
/etc/rategate
{{- end }}

{{/* The Secret holding the admin token, or "" when there is none. */}}
{{- define "rategate.adminSecretName" -}}
{{- if .Values.admin.existingSecret }}
{{- .Values.admin.existingSecret }}
{{- else if .Values.admin.token }}
{{- printf "%s-admin" (include "rategate.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* The ClusterIP Service of the admin port (metrics, health, buckets). */}}
{{- define "rategate.metricsServiceName" -}}
{{- printf "%s-metrics" (include "rategate.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}

{{/*
The settings the gateway reads only at start, as one document: their checksum on the pod template rolls
the pods when one changes. The gateway reloads the rest of limits.yaml live (limits, clients except the
introspection path, responses, exempt, log, server body limits), so those are left out on purpose: a
limit change must not restart anything. Settings passed as environment variables are in the pod template
already. The admin token is in (a changed Secret is not seen by a running pod); a Secret named by
admin.existingSecret or store.existingSecret cannot be seen by the chart: `kubectl rollout restart` after
changing one.
*/}}
{{- define "rategate.restartSettings" -}}
{{- $config := .Values.config | default dict }}
{{- $clients := get $config "clients" | default dict }}
{{- $account := get $clients "account" | default dict }}
{{- $server := omit (get $config "server" | default dict) "maxBodySize" "bodyLimits" }}
{{- toJson (dict
  "admin" (get $config "admin")
  "adminToken" .Values.admin.token
  "store" (get $config "store")
  "upstream" (get $config "upstream")
  "upstreams" (get $config "upstreams")
  "routes" (get $config "routes")
  "server" $server
  "introspectionPath" (get $account "path")) }}
{{- end }}

{{/*
Refuses `config` keys the chart sets itself: the listen addresses, upstream.url and store.url reach the
gateway as RATEGATE_* variables, which win over the file (the key would be silently ignored), `limits`
is its own value, and an admin token in `config` would sit in the ConfigMap in clear. Renders nothing.
*/}}
{{- define "rategate.checkConfig" -}}
{{- $config := .Values.config | default dict }}
{{- if and (ne .Values.mode "sidecar") (not .Values.upstream.url) }}
{{- fail "upstream.url is required in ingress mode: your API's URL (e.g. http://mastodon-web.social.svc:3000), or builtin for the demo API" }}
{{- end }}
{{- range $key, $instead := dict "limits" "the value limits" "listen" "gateway.port" }}
{{- if hasKey $config $key }}
{{- fail (printf "config.%s is set by the chart; use %s instead" $key $instead) }}
{{- end }}
{{- end }}
{{- $owned := dict "admin" (list "listen" "gateway.adminPort") "upstream" (list "url" "upstream.url") "store" (list "url" "store.url or store.existingSecret") }}
{{- range $section, $pair := $owned }}
{{- if hasKey (get $config $section | default dict) (first $pair) }}
{{- fail (printf "config.%s.%s is set by the chart; use %s instead" $section (first $pair) (last $pair)) }}
{{- end }}
{{- end }}
{{- if hasKey (get $config "admin" | default dict) "token" }}
{{- fail "config.admin.token would put the admin token in the ConfigMap, in clear: set admin.token (the chart makes a Secret) or admin.existingSecret instead" }}
{{- end }}
{{- end }}

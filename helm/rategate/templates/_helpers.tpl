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

{{/* "true" when the counters live in a store every replica shares (Redis), "" for memory. */}}
{{- define "rategate.sharedStore" -}}
{{- if or .Values.store.existingSecret (ne .Values.store.url "memory") }}true{{ end }}
{{- end }}

{{/*
The replicas sharing the store (config.store.gateways: each counts alone from its 1/gateways share
while Redis fails, and leases are sized by it): replicaCount, or with the HPA its maxReplicas, the
most that can run, so that the replicas together stay within about one limit while Redis is down
(with fewer running they admit less: strict, for an outage).
*/}}
{{- define "rategate.gateways" -}}
{{- if .Values.autoscaling.enabled }}{{ .Values.autoscaling.maxReplicas }}{{ else }}{{ .Values.replicaCount }}{{ end }}
{{- end }}

{{/* .Values.config with what the chart derives: store.gateways, unless the operator set it. */}}
{{- define "rategate.config" -}}
{{- $config := deepCopy (.Values.config | default dict) }}
{{- if .Values.tls.existingSecret }}
{{- $server := get $config "server" | default dict }}
{{- if not (hasKey $server "tls") }}
{{- $_ := set $server "tls" (dict "certFile" (printf "%s/tls.crt" (include "rategate.tlsDir" .)) "keyFile" (printf "%s/tls.key" (include "rategate.tlsDir" .))) }}
{{- $_ := set $config "server" $server }}
{{- end }}
{{- end }}
{{- $store := get $config "store" | default dict }}
{{- if and (include "rategate.sharedStore" .) (not (hasKey $store "gateways")) }}
{{- $_ := set $store "gateways" (include "rategate.gateways" . | int) }}
{{- $_ := set $config "store" $store }}
{{- end }}
{{- toJson $config }}
{{- end }}

{{/* limits.yaml as the chart renders it: the ConfigMap's and the pre-upgrade check's, one text. */}}
{{- define "rategate.limitsYaml" -}}
# Rendered by the rategate chart from .Values.limits and .Values.config. Listen addresses, the
# upstream, the store and its secrets come from the pod's environment (RATEGATE_*), which wins over this file.
{{ toYaml (merge (dict "limits" .Values.limits) (include "rategate.config" . | fromJson)) }}
{{- end }}

{{/* Inside the pod the TLS Secret (tls.existingSecret) is mounted here, as a directory the kubelet updates. */}}
{{- define "rategate.tlsDir" -}}
/etc/rategate-tls
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

{{/* The Secret holding the sentinels' password, or "" when there is none. */}}
{{- define "rategate.sentinelSecretName" -}}
{{- if .Values.store.sentinelPasswordSecret }}
{{- .Values.store.sentinelPasswordSecret }}
{{- else if .Values.store.sentinelPassword }}
{{- printf "%s-store" (include "rategate.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* The client-facing Service's externalTrafficPolicy: Local unless set (LoadBalancer and NodePort only). */}}
{{- define "rategate.externalTrafficPolicy" -}}
{{- if has .Values.service.type (list "LoadBalancer" "NodePort") }}{{ .Values.service.externalTrafficPolicy | default "Local" }}{{ end }}
{{- end }}

{{/*
The store's TCP ports, as a JSON list: networkPolicy.egress.storePorts when set; else from store.url
(every host of a cluster or Sentinel list; a Sentinel URL adds 6379, the data port its sentinels hand
out, which the URL cannot say); else, the URL being in a Secret the chart cannot read, 6379 and 26379.
*/}}
{{- define "rategate.storePorts" -}}
{{- $ports := list }}
{{- if .Values.networkPolicy.egress.storePorts }}
{{- $ports = .Values.networkPolicy.egress.storePorts }}
{{- else if .Values.store.existingSecret }}
{{- $ports = list 6379 26379 }}
{{- else if ne .Values.store.url "memory" }}
{{- $sentinel := regexMatch "^rediss?-sentinel://" .Values.store.url }}
{{- $hosts := regexReplaceAll "/.*$" (regexReplaceAll "^[^@/]*@" (regexReplaceAll "^[a-z+-]+://" .Values.store.url "") "") "" }}
{{- range splitList "," $hosts }}
{{- $ports = append $ports (regexFind ":[0-9]+$" . | trimPrefix ":" | default (ternary "26379" "6379" $sentinel) | int) }}
{{- end }}
{{- if $sentinel }}
{{- $ports = append $ports 6379 }}
{{- end }}
{{- end }}
{{- toJson (uniq $ports) }}
{{- end }}

{{/* The app container's preStop pause in sidecar mode: app.preStopSleepSeconds, else the gateway's pause + its drain. */}}
{{- define "rategate.appPreStopSeconds" -}}
{{- if kindIs "invalid" .Values.app.preStopSleepSeconds }}{{ add (int .Values.lifecycle.preStopSleepSeconds) (include "rategate.drainSeconds" . | int) }}{{ else }}{{ int .Values.app.preStopSleepSeconds }}{{ end }}
{{- end }}

{{/*
The gateway's drain bound in whole seconds (rounded up): config.server.drainGrace, read as the gateway
reads a duration (30s, 1m30s, 250ms, or integer milliseconds), default 10s.
*/}}
{{- define "rategate.drainSeconds" -}}
{{- $v := dig "server" "drainGrace" "10s" (.Values.config | default dict) }}
{{- $ms := 0 }}
{{- $units := dict "ms" 1 "s" 1000 "m" 60000 "h" 3600000 "d" 86400000 }}
{{- if and (kindIs "string" $v) (regexMatch "^[0-9]+$" $v) }}
{{- $ms = atoi $v }}
{{- else if kindIs "string" $v }}
{{- if not (regexMatch "^([0-9]+(ms|s|m|h|d))+$" $v) }}
{{- fail (printf "config.server.drainGrace: invalid duration %q (use 30s, 5m, 1h, 1d, 250ms or milliseconds)" $v) }}
{{- end }}
{{- range regexFindAll "[0-9]+(ms|s|m|h|d)" $v -1 }}
{{- $ms = add $ms (mul (regexFind "^[0-9]+" . | atoi) (get $units (regexReplaceAll "^[0-9]+" . ""))) }}
{{- end }}
{{- else }}
{{- $ms = int64 $v }}
{{- end }}
{{- div (add $ms 999) 1000 }}
{{- end }}

{{/*
The pod's termination grace period: terminationGracePeriodSeconds when set, else the preStop pause (the
app's, in sidecar mode, when longer) plus the drain plus 15 s for the process to close its store and flush
its logs. 30 s with the chart's defaults.
*/}}
{{- define "rategate.terminationGraceSeconds" -}}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds }}
{{- $pause := add (int .Values.lifecycle.preStopSleepSeconds) (include "rategate.drainSeconds" . | int) }}
{{- if and (eq .Values.mode "sidecar") (not .Values.app.lifecycle) }}{{ $pause = max $pause (include "rategate.appPreStopSeconds" . | int) }}{{ end }}
{{- add $pause 15 }}
{{- else }}
{{- int .Values.terminationGracePeriodSeconds }}
{{- end }}
{{- end }}

{{/*
The pod's securityContext. In sidecar mode the app runs as its own image's user (Mastodon's 991), so
the gateway's runAsUser/runAsGroup/fsGroup (10001) stay on the gateway container, not the pod, and
app.podSecurityContext adds the app's own (e.g. fsGroup).
*/}}
{{- define "rategate.podSecurityContext" -}}
{{- if eq .Values.mode "sidecar" }}
{{- toYaml (merge (deepCopy (.Values.app.podSecurityContext | default dict)) (omit .Values.podSecurityContext "runAsUser" "runAsGroup" "fsGroup")) }}
{{- else }}
{{- toYaml .Values.podSecurityContext }}
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
  "sentinelPassword" .Values.store.sentinelPassword
  "store" (get (include "rategate.config" . | fromJson) "store")
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
{{- if hasKey (get $config "store" | default dict) "sentinelPassword" }}
{{- fail "config.store.sentinelPassword would put the sentinels' password in the ConfigMaps, in clear: set store.sentinelPassword (the chart makes a Secret) or store.sentinelPasswordSecret instead" }}
{{- end }}
{{- include "rategate.checkStore" . }}
{{- include "rategate.checkClients" . }}
{{- end }}

{{/*
Security: refuses a store.url that carries a password (`redis://:PASSWORD@…`, `USER:PASSWORD@`). The
URL is rendered as a plain env value into the Deployment and the config-check Job, where anyone who may
read pods (or `helm get manifest`) reads it, and NOTES print it; the Secret named by
store.existingSecret is the one place for it. A user name alone (an ACL user without a password) is no secret and passes. Renders nothing.
*/}}
{{- define "rategate.checkStore" -}}
{{- if regexMatch "^[a-z+-]+://[^@]*:[^@]*@" .Values.store.url }}
{{- fail "store.url carries a password, which would be rendered in clear into the Deployment, the config-check Job and NOTES: put the whole URL in a Secret and name it in store.existingSecret (its key in store.existingSecretKey, default url)" }}
{{- end }}
{{- end }}

{{/*
Refuses a release where nobody said who may set the client's address. The gateway believes
X-Forwarded-For only from config.clients.trustedProxies (default: loopback). Behind an Ingress
controller every client would be counted as the controller, so its pods must be named; behind a
LoadBalancer or NodePort with externalTrafficPolicy Cluster, kube-proxy source-NATs every client to a
node's address. Clients connecting directly (LoadBalancer/NodePort with Local, the chart's default for
them) need nothing named; nor does the demo (upstream.url builtin, reached by port-forward).
*/}}
{{- define "rategate.checkClients" -}}
{{- $named := hasKey (get (.Values.config | default dict) "clients" | default dict) "trustedProxies" }}
{{- $policy := include "rategate.externalTrafficPolicy" . }}
{{- $demo := and (ne .Values.mode "sidecar") (eq .Values.upstream.url "builtin") }}
{{- if not $named }}
{{- if .Values.ingress.enabled }}
{{- fail "ingress.enabled: the Ingress controller connects to the gateway, so config.clients.trustedProxies must name its pods' addresses (your cluster's pod range, e.g. [10.244.0.0/16]), or every client is counted as the controller (README: Client addresses)" }}
{{- else if eq $policy "Cluster" }}
{{- fail "service.externalTrafficPolicy Cluster source-NATs every client to a node's address: leave it empty (Local) so clients reach the gateway with their own, or name the proxies in front in config.clients.trustedProxies (README: Client addresses)" }}
{{- else if and (not $policy) (not $demo) }}
{{- fail "config.clients.trustedProxies must name what connects to the gateway: your Ingress controller's or load balancer's addresses (e.g. [10.244.0.0/16]), or [loopback] when clients connect directly; or use service.type LoadBalancer/NodePort (externalTrafficPolicy Local) (README: Client addresses)" }}
{{- end }}
{{- end }}
{{- end }}

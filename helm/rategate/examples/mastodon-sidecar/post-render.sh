#!/bin/sh
# Helm post-renderer: Helm's rendered manifests arrive on stdin, the patched ones leave on stdout.
# The rendered release (Secrets included) is written only to a private temporary folder, removed on exit:
# nothing is left beside this script.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
if grep -q '^ *trustedProxies:.*INGRESS_CONTROLLER_PODS' "$here/limits.yaml"; then
  echo "post-render.sh: edit clients.trustedProxies in $here/limits.yaml first: replace INGRESS_CONTROLLER_PODS with your Ingress controller's pod range (e.g. 10.244.0.0/16)" >&2
  exit 1
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
chmod 700 "$work"
cp "$here"/kustomization.yaml "$here"/limits.yaml "$here"/patch-*.yaml "$here"/networkpolicy.yaml "$here"/podmonitor.yaml "$work"/
cat > "$work/helm-output.yaml"
kubectl kustomize "$work"

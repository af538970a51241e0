#!/bin/sh
# Helm post-renderer: Helm's rendered manifests arrive on stdin, the patched ones leave on stdout.
set -eu
cd "$(dirname "$0")"
cat > helm-output.yaml
exec kubectl kustomize .

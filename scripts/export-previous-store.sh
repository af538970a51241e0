#!/bin/sh
# Exports the previous release's Redis store code from git into test/fixtures/previous-release, for
# test/ops/mixed-versions.test.ts (two releases on one Redis during a rolling upgrade). The store's
# modules are transpiled to plain ESM one by one (type-only imports vanish, nothing is bundled), the Lua
# scripts copied as they are, and the commit recorded. Run from the repository root:
#   scripts/export-previous-store.sh COMMIT     # e.g. the commit of the last release
set -eu
commit="${1:?usage: scripts/export-previous-store.sh COMMIT}"
out=test/fixtures/previous-release
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git archive "$commit" src/limiter src/config/store-url.ts | tar -x -C "$work"
# The store and what it imports at run time (its type-only imports need nothing), and the key builder.
modules="limiter/redis/store limiter/redis/batcher limiter/redis/codec limiter/redis/connection limiter/redis/cross-slot
limiter/redis/same-slot limiter/redis/sentinel-watch limiter/redis/slot limiter/redis/topology limiter/errors limiter/keys config/store-url"
rm -rf "$out"
mkdir -p "$out/src/limiter/redis/lua"
for m in $modules; do
  npx --no-install esbuild "$work/src/$m.ts" --format=esm --platform=node --target=node20 --log-level=warning --outfile="$out/src/$m.js"
done
cp "$work"/src/limiter/redis/lua/*.lua "$out/src/limiter/redis/lua/"
printf '%s\n' "$(git rev-parse "$commit")" > "$out/COMMIT"
echo "exported the store of $(git log -1 --format='%h %ad' --date=short "$commit") to $out"

#!/usr/bin/env sh
# Builds the chart renderer into .build/helm-render, offline, from Debian's Go packages: GOPATH mode
# (GO111MODULE=off) with GOPATH=/usr/share/gocode, where golang-github-masterminds-sprig-dev and
# golang-gopkg-yaml.v2-dev put their sources. No module download happens.
set -eu
cd "$(dirname "$0")/../.."
mkdir -p .build
export GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS= GOPROXY=off
export GOCACHE="${GOCACHE:-$PWD/.build/go-cache}"
# Built aside and renamed: test workers that build at once never run a half-written binary.
tmp=".build/helm-render.$$"
go build -o "$tmp" ./scripts/helm-render
mv -f "$tmp" .build/helm-render
echo "built .build/helm-render"

# syntax=docker/dockerfile:1
# rategate container image: a build stage compiles TypeScript with the dev dependencies, then prunes them;
# the runtime stage holds only dist/, production node_modules/, package.json and the shipped config.
#
#   docker build --build-arg REVISION="$(git rev-parse HEAD)" -t ghcr.io/rategate/rategate:0.2.0 .
#   docker push ghcr.io/rategate/rategate:0.2.0    # the chart's default image.repository (or push to your registry and set it)
#   docker run --rm -p 8080:8080 -p 127.0.0.1:9464:9464 rategate
#   docker run --rm -p 8080:8080 -v "$PWD/my-limits:/etc/rategate:ro" \
#     -e RATEGATE_UPSTREAM=http://api.internal:3000 -e RATEGATE_STORE=redis://redis:6379 rategate
#
# The limit table is read from /etc/rategate/limits.yaml (the image ships config/limits.yaml there).
# Mount a *directory* over /etc/rategate to replace it: the gateway watches the directory, so edits and
# Kubernetes ConfigMap symlink swaps apply without a restart.

# The base image is named by tag, not by digest, on purpose: nothing in this repository bumps a pinned
# digest (no Renovate/Dependabot), and a digest nobody updates silently freezes the image on old Debian
# and Node security fixes, while `22-bookworm-slim` follows Node 22's patch releases. For a reproducible
# build, pin it at build time:
#   docker buildx imagetools inspect node:22-bookworm-slim      # prints the current digest
#   docker build --build-arg NODE_IMAGE=node:22-bookworm-slim@sha256:<digest> -t rategate .
ARG NODE_IMAGE=node:22-bookworm-slim

FROM ${NODE_IMAGE} AS build
# The git revision: the build context has no .git (.dockerignore), so the build is told it; `npm run build`
# writes it into dist/build-info.json (scripts/build-info.ts) for --version and rategate_build_info.
ARG REVISION=unknown
WORKDIR /app
# Manifests first: the dependency layer is reused until package*.json change.
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
COPY config ./config
# Build with the dev dependencies (typescript), then drop them: the runtime stage copies a
# production-only node_modules, the same tree `npm ci --omit=dev` would install.
RUN REVISION="${REVISION}" npm run build \
 && npm prune --omit=dev --no-audit --no-fund \
 && npm cache clean --force

FROM ${NODE_IMAGE} AS runtime
ARG NODE_IMAGE
# OCI image labels (https://specs.opencontainers.org/image-spec/annotations/). Pass the build's facts:
#   docker build --build-arg REVISION="$(git rev-parse HEAD)" \
#     --build-arg CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)" --build-arg SOURCE=https://… -t … .
# VERSION defaults to package.json's (test/packaging/dockerfile.test.ts holds them together); REVISION is
# the build stage's, so the label and --version name the same commit.
ARG VERSION=0.2.0
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE=unknown
LABEL org.opencontainers.image.title="rategate" \
      org.opencontainers.image.description="A rate-limiting reverse proxy gateway (Mastodon-style limit table, Redis or memory store)" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.base.name="${NODE_IMAGE}"
# RATEGATE_ADMIN_LISTEN: the admin listener (metrics, /healthz, /readyz) defaults to 127.0.0.1:9464,
# which nothing outside the container can reach; in a container the kubelet's probes and Prometheus
# must reach it, so the image binds it on all interfaces. Do not publish 9464 to the outside world:
# off loopback the gateway refuses /admin/buckets unless a token is set (RATEGATE_ADMIN_TOKEN).
ENV NODE_ENV=production \
    RATEGATE_CONFIG=/etc/rategate/limits.yaml \
    RATEGATE_LISTEN=0.0.0.0:8080 \
    RATEGATE_ADMIN_LISTEN=0.0.0.0:9464
WORKDIR /app
# Files stay owned by root and are only readable by the runtime user: the process cannot rewrite its
# own code, and the image runs with a read-only root filesystem.
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/config ./config
COPY --from=build /app/config/limits.yaml /etc/rategate/limits.yaml
# A numeric uid/gid (not a name) so Kubernetes' runAsNonRoot can verify it without /etc/passwd.
# 10001 matches the Helm chart's securityContext.runAsUser.
USER 10001:10001
EXPOSE 8080 9464
# Exec form, no shell: probes the admin port named by RATEGATE_ADMIN_LISTEN (2 s timeout, exit 0/1).
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
  CMD ["node", "dist/cli/healthcheck.js", "/healthz"]
# Exec form: node is PID 1 and receives SIGTERM itself, which starts the graceful drain.
ENTRYPOINT ["node", "dist/cli/index.js"]
CMD ["serve", "--config", "/etc/rategate/limits.yaml"]

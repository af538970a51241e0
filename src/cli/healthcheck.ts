/**
 * @module The container health check: GETs the admin listener's /healthz and exits 0 (healthy) or 1.
 *
 * Run by the Dockerfile's HEALTHCHECK as `node dist/cli/healthcheck.js [PATH]`. It imports only node:http
 * on purpose: it starts every few seconds inside the container, so it must be cheap and must not load
 * the gateway (config, stores, prom-client). The admin address comes from RATEGATE_ADMIN_LISTEN (the
 * same variable the gateway reads), else 127.0.0.1:9464; a wildcard host (0.0.0.0, ::) is probed on
 * loopback, which is where a check inside the container can always reach it.
 */
import http from 'node:http';

const TIMEOUT_MS = 2_000;
const DEFAULT_PORT = 9464;

interface Target {
  readonly host: string;
  readonly port: number;
}

/** `HOST:PORT` or `[V6]:PORT` → where to connect; anything unreadable falls back to the default port. */
function targetOf(listen: string | undefined): Target {
  const fallback: Target = { host: '127.0.0.1', port: DEFAULT_PORT };
  if (listen === undefined || listen.trim() === '') return fallback;
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(listen.trim());
  if (m === null) return fallback;
  const port = Number(m[3]);
  if (!Number.isInteger(port) || port < 1 || port > 65535) return fallback;
  const host = m[1] ?? m[2] ?? '';
  const wildcard = host === '' || host === '0.0.0.0' || host === '::';
  return { host: wildcard ? '127.0.0.1' : host, port };
}

/** Resolves true on a 2xx answer within the timeout, false on anything else (refused, timeout, 5xx). */
function probe(target: Target, path: string, timeoutMs = TIMEOUT_MS): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get({ host: target.host, port: target.port, path, timeout: timeoutMs, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', () => resolve(false));
  });
}

const path = process.argv[2] ?? '/healthz';
const target = targetOf(process.env.RATEGATE_ADMIN_LISTEN);
probe(target, path.startsWith('/') ? path : `/${path}`).then(
  (ok) => {
    const host = target.host.includes(':') ? `[${target.host}]` : target.host;
    if (!ok) console.error(`rategate healthcheck: http://${host}:${target.port}${path} is not healthy`);
    process.exit(ok ? 0 : 1);
  },
  () => process.exit(1),
);

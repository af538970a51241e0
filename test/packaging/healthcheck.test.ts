/** @module The container health check (src/cli/healthcheck.ts), run as a real process against real servers. */
import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { read, ROOT } from './support.js';
import { builtModule } from '../support/process.js';

interface Outcome {
  code: number | null;
  ms: number;
}

/** Runs the script as the build compiles it (what `node dist/cli/healthcheck.js` runs in the image). */
function runHealthcheck(env: Record<string, string>, args: string[] = []): Promise<Outcome> {
  const started = Date.now();
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  if (!('RATEGATE_ADMIN_LISTEN' in env)) delete childEnv.RATEGATE_ADMIN_LISTEN;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [builtModule('cli/healthcheck.js'), ...args], {
      cwd: ROOT,
      env: childEnv,
      stdio: ['ignore', 'ignore', 'ignore'],
    });
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, ms: Date.now() - started }));
  });
}

const servers: http.Server[] = [];

async function start(handler: http.RequestListener): Promise<number> {
  const server = http.createServer(handler);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/** A port that was free a moment ago and has nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

afterEach(async () => {
  await Promise.all(
    servers.splice(0).map(
      (s) =>
        new Promise<void>((resolve) => {
          s.closeAllConnections();
          s.close(() => resolve());
        }),
    ),
  );
});

describe('the health check script', () => {
  it('exits 0 when the admin listener answers /healthz with 200', async () => {
    const seen: string[] = [];
    const port = await start((req, res) => {
      seen.push(req.url ?? '');
      res.writeHead(req.url === '/healthz' ? 200 : 404).end('{"status":"ok"}');
    });
    const { code } = await runHealthcheck({ RATEGATE_ADMIN_LISTEN: `127.0.0.1:${port}` });
    expect(code).toBe(0);
    expect(seen).toEqual(['/healthz']);
  });

  it('probes loopback when the admin listener is bound to a wildcard address', async () => {
    const port = await start((_req, res) => res.writeHead(200).end());
    expect((await runHealthcheck({ RATEGATE_ADMIN_LISTEN: `0.0.0.0:${port}` })).code).toBe(0);
  });

  it('exits 1 when nothing listens on the admin port', async () => {
    const port = await closedPort();
    expect((await runHealthcheck({ RATEGATE_ADMIN_LISTEN: `127.0.0.1:${port}` })).code).toBe(1);
  });

  it('exits 1 when the admin listener answers with an error status', async () => {
    const port = await start((_req, res) => res.writeHead(503).end('{"status":"not ready"}'));
    expect((await runHealthcheck({ RATEGATE_ADMIN_LISTEN: `127.0.0.1:${port}` })).code).toBe(1);
  });

  it('gives up with exit 1 after about two seconds when the listener never answers', async () => {
    const port = await start(() => {
      /* never answers */
    });
    const { code, ms } = await runHealthcheck({ RATEGATE_ADMIN_LISTEN: `127.0.0.1:${port}` });
    expect(code).toBe(1);
    expect(ms).toBeGreaterThanOrEqual(1_900);
  });

  it('checks another admin path when given one, such as /readyz', async () => {
    const port = await start((req, res) => res.writeHead(req.url === '/readyz' ? 503 : 200).end());
    expect((await runHealthcheck({ RATEGATE_ADMIN_LISTEN: `127.0.0.1:${port}` }, ['/readyz'])).code).toBe(1);
    expect((await runHealthcheck({ RATEGATE_ADMIN_LISTEN: `127.0.0.1:${port}` }, ['/healthz'])).code).toBe(0);
  });

  it('imports nothing but Node built-ins, so it stays cheap to start every few seconds', () => {
    const imports = [...read('src/cli/healthcheck.ts').matchAll(/^\s*import\s[^'"]*['"]([^'"]+)['"]/gm)].map(
      (m) => m[1],
    );
    expect(imports.length).toBeGreaterThan(0);
    for (const specifier of imports) expect(specifier).toMatch(/^node:/);
  });
});

/**
 * Issue 29 item 6, through the real `rategate serve`: readiness is the gateway's own (config loaded,
 * listening, not draining). An upstream every replica shares going down must not take every endpoint
 * away (blocks, bans and 429s would vanish with the 502s): /readyz stays 200 and reports the upstream
 * in its body, `rategate_upstream_up` says it to alerts, and `readiness.upstream: true` restores the
 * old behaviour for those who want it.
 */
import http from 'node:http';
import type net from 'node:net';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { send } from '../support/http.js';
import { spawnServe, stop, waitFor, type GatewayProcess } from '../support/process.js';
import { freePort } from '../support/servers.js';
import { scaledMs } from '../support/speed.js';

const TABLE = `log: { requests: debug }
limits:
  - { name: sign-up, match: POST /api/v1/accounts, per: ip, limit: 1, period: 30m }
`;

let gw: GatewayProcess | undefined;
let listener: net.Server | undefined;
afterEach(async () => {
  if (gw !== undefined) await stop(gw);
  gw = undefined;
  await new Promise<void>((r) => (listener ? listener.close(() => r()) : r()));
  listener = undefined;
});

/** `rategate serve` with `table`, proxying to an upstream port where nothing listens (yet). */
async function serveWithDeadUpstream(table: string): Promise<{ port: number }> {
  const port = await freePort();
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'rategate-ready-')), 'limits.yaml');
  writeFileSync(file, table);
  gw = await spawnServe(['--config', file, '--upstream', `http://127.0.0.1:${port}`], { RATEGATE_LOG_LEVEL: 'warn' });
  return { port };
}

const readyz = async (): Promise<{ status: number; body: Record<string, any> }> => {
  const r = await fetch(`${gw!.adminUrl}/readyz`);
  return { status: r.status, body: (await r.json()) as Record<string, any> };
};
const upstreamUp = async (): Promise<string | undefined> =>
  /^rategate_upstream_up (\d)$/m.exec(await (await fetch(`${gw!.adminUrl}/metrics`)).text())?.[1];

describe('readiness with the upstream down', () => {
  it(
    'stays 200 by default, says the upstream is unreachable in the body and the metric, and keeps answering 429s',
    async () => {
      const { port } = await serveWithDeadUpstream(TABLE);
      const r = await readyz();
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({
        status: 'ready',
        checks: { config: true, serving: true },
        upstream: { reachable: false },
      });
      expect(r.body.checks).not.toHaveProperty('upstream');
      expect(await upstreamUp()).toBe('0');
      // The pod still does its job: the limit holds (a 502 for the admitted request, a 429 for the next).
      const signUp = () =>
        send(gw!.url, { method: 'POST', path: '/api/v1/accounts', headers: { 'content-length': '0' } });
      expect((await signUp()).status).toBe(502);
      expect((await signUp()).status).toBe(429);
      // The upstream comes back, answering HTTP (the probe is a request: a port that only accepts is not up,
      // test/proxy/upstream-probe.test.ts): the metric follows within the probe's second.
      listener = http.createServer((_req, res) => res.end());
      await new Promise<void>((resolve) => listener!.listen(port, '127.0.0.1', resolve));
      await waitFor(async () => (await upstreamUp()) === '1', 5_000, 'rategate_upstream_up back to 1');
      expect((await readyz()).body.upstream).toEqual({ reachable: true });
    },
    scaledMs(30_000),
  );

  it(
    'fails with 503 when readiness.upstream asks for it',
    async () => {
      await serveWithDeadUpstream(`${TABLE}readiness: { upstream: true }\n`);
      const r = await readyz();
      expect(r.status).toBe(503);
      expect(r.body).toMatchObject({
        status: 'not ready',
        checks: { upstream: false },
        upstream: { reachable: false },
      });
    },
    scaledMs(30_000),
  );
});

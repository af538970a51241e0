/**
 * Issue 40: a frozen upstream (a Puma stopped with SIGSTOP) still accepts TCP connections — the kernel
 * completes the handshake into the listen backlog — so a connection probe saw it up while every request
 * waited 30 s for a 504. The probe now asks a real request with a short deadline: a real upstream process,
 * stopped with SIGSTOP, makes rategate_upstream_up 0 within 30 s, and a real Prometheus with the shipped
 * rules fires RategateUpstreamDown within 90 s (default upstream.timeout 30 s); after SIGCONT it is 1 again.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, describe, expect, it } from 'vitest';
import { startTestGateway, SEED_TABLE, type TestGateway } from '../support/gateway.js';
import { eventually } from '../support/eventually.js';
import { prometheusMissing, startPrometheus, type RunningPrometheus } from '../support/prometheus.js';
import { scaledMs } from '../support/speed.js';

const RULES = 'helm/rategate/alerts/rategate.rules.yaml';
const missing = prometheusMissing();
if (missing.length > 0) {
  if (process.env.CI) throw new Error(`${missing.join(' and ')} not found: install Debian's prometheus package`);
  console.warn(
    `SKIPPING the frozen-upstream alert test: ${missing.join(' and ')} not found (apt-get install prometheus)`,
  );
}

/** A tiny upstream in its own process (so that SIGSTOP freezes it and not the test), answering 200 to all. */
async function startUpstreamProcess(): Promise<{ child: ChildProcess; url: string }> {
  const code = `const s = require('node:http').createServer((q, r) => { q.resume(); r.end('ok'); });
s.listen(0, '127.0.0.1', () => console.log(s.address().port));`;
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [chunk] = (await once(child.stdout!, 'data')) as [Buffer];
  return { child, url: `http://127.0.0.1:${chunk.toString().trim()}` };
}

async function upstreamUp(gw: TestGateway): Promise<string | undefined> {
  const text = await (await fetch(`${gw.adminUrl}/metrics`)).text();
  return /^rategate_upstream_up (\S+)$/m.exec(text)?.[1];
}

describe.skipIf(missing.length > 0)('a frozen upstream (SIGSTOP)', () => {
  let upstream: ChildProcess | undefined;
  let gw: TestGateway | undefined;
  let prometheus: RunningPrometheus | undefined;
  afterAll(async () => {
    prometheus?.stop();
    upstream?.kill('SIGCONT');
    await gw?.shutdown(200);
    upstream?.kill('SIGKILL');
  });

  it(
    'makes rategate_upstream_up 0 within 30 s and fires RategateUpstreamDown within 90 s; back to 1 after SIGCONT',
    async () => {
      const up = await startUpstreamProcess();
      upstream = up.child;
      gw = await startTestGateway(SEED_TABLE, { upstream: up.url });
      expect(gw.snapshot().config.upstream.timeout).toBe(30_000);
      prometheus = await startPrometheus({ job: 'rategate', targets: [new URL(gw.adminUrl).host], rules: [RULES] });
      const prom = prometheus;
      await eventually(async () => (await prom.value('rategate_upstream_up')) === '1', {
        what: 'Prometheus scraping upstream_up 1',
        withinMs: 30_000,
        everyMs: 200,
      });
      expect((await fetch(`${gw.url}/api/v1/timelines/public`)).status).toBe(200);

      up.child.kill('SIGSTOP');
      const frozenAt = Date.now();
      // A client's request to the frozen upstream: it waits for upstream.timeout, then gets the gateway's 504.
      const waiting = fetch(`${gw.url}/api/v1/timelines/public`).then((r) => r.status);

      await eventually(async () => (await upstreamUp(gw!)) === '0', {
        what: 'rategate_upstream_up 0',
        withinMs: 30_000,
        everyMs: 500,
      });
      const seenMs = Date.now() - frozenAt;
      const firing = await eventually(
        async () =>
          (await prom.alerts()).find((a) => a.labels.alertname === 'RategateUpstreamDown' && a.state === 'firing'),
        {
          what: 'RategateUpstreamDown firing',
          withinMs: 90_000 - (Date.now() - frozenAt),
          everyMs: 500,
          until: (a) => a !== undefined,
        },
      );
      const firedMs = Date.now() - frozenAt;
      expect(firing!.labels).toMatchObject({ severity: 'critical', instance: new URL(gw.adminUrl).host });
      console.log(
        `frozen upstream: rategate_upstream_up 0 after ${seenMs} ms, RategateUpstreamDown firing after ${firedMs} ms`,
      );
      expect(await waiting).toBe(504);

      up.child.kill('SIGCONT');
      await eventually(async () => (await upstreamUp(gw!)) === '1', {
        what: 'rategate_upstream_up back to 1',
        withinMs: 30_000,
        everyMs: 500,
      });
      // The gateway answered throughout and serves again.
      expect((await fetch(`${gw.url}/api/v1/timelines/public`)).status).toBe(200);
    },
    scaledMs(150_000),
  );
});

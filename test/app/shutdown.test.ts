/** Graceful shutdown of the real process: SIGTERM drains in-flight requests and exits 0. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send } from '../support/http.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { eventually } from '../support/eventually.js';
import { capturingLogger, SEED_TABLE, startTestGateway } from '../support/gateway.js';
import { spawnServe, waitFor } from '../support/process.js';
import { scaledMs } from '../support/speed.js';

let upstream: RecordingUpstream;
beforeAll(async () => {
  upstream = await startRecordingUpstream();
  upstream.route('/api/v1/slow', (_req, res) => {
    setTimeout(() => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{"slow":true}');
    }, 800);
  });
  for (const [route, ms] of [
    ['/api/v1/four-seconds', 4_000],
    ['/api/v1/twelve-seconds', 12_000],
  ] as const) {
    upstream.route(route, (_req, res) => {
      const timer = setTimeout(() => {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end('{"done":true}');
      }, ms);
      res.once('close', () => clearTimeout(timer));
    });
  }
  upstream.route('/api/v1/slower', (_req, res) => {
    setTimeout(() => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{"slower":true}');
    }, 1500);
  });
});

/** A raw keep-alive connection: sends one request, resolves with the response head and body once complete. */
function rawRequest(
  port: number,
  path: string,
): { socket: net.Socket; answer: Promise<{ head: string; body: string }>; closed: Promise<number> } {
  const socket = net.connect(port, '127.0.0.1');
  let data = '';
  const answer = new Promise<{ head: string; body: string }>((resolve, reject) => {
    socket.on('data', (d) => {
      data += d;
      const end = data.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = data.slice(0, end);
      const body = data.slice(end + 4);
      if (/transfer-encoding: chunked/i.test(head)) {
        // One chunk then the last: enough for these small JSON answers.
        if (body.endsWith('0\r\n\r\n')) resolve({ head, body: body.split('\r\n')[1] ?? '' });
      } else if (body.length >= Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0)) resolve({ head, body });
    });
    socket.on('error', reject);
  });
  const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now())));
  socket.write(`GET ${path} HTTP/1.1\r\nHost: gw\r\nConnection: keep-alive\r\n\r\n`);
  return { socket, answer, closed };
}
afterAll(async () => upstream.close());

describe('graceful shutdown', () => {
  it('finishes an in-flight slow request after SIGTERM, refuses new connections, and exits 0', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-drain-'));
    writeFileSync(path.join(dir, 'limits.yaml'), SEED_TABLE);
    const gw = await spawnServe(['--config', path.join(dir, 'limits.yaml'), '--upstream', upstream.url]);
    await eventually(() => gw.output().includes('rategate listening'), { what: 'the start-up line' });
    const { child, exited, url } = gw;
    expect(gw.output()).toMatch(/store memory/);

    const slow = send(url, { path: '/api/v1/slow' });
    await waitFor(() => upstream.seen.some((r) => r.url === '/api/v1/slow'), 5_000, 'the slow request at the upstream');
    child.kill('SIGTERM');
    // The signal's delivery and the listener's close cannot be awaited from here: a new connection is refused soon.
    await eventually(
      () =>
        send(url, { path: '/api/v1/statuses/1' }).then(
          () => false,
          () => true,
        ),
      { what: 'a new connection refused' },
    );
    const answer = await slow;
    expect(answer.status).toBe(200);
    expect(answer.body).toBe('{"slow":true}');
    expect(answer.headers['x-ratelimit-limit']).toBe('300');
    expect(await exited).toBe(0);
  });

  it('ends the drain when the last in-flight request is done: Connection: close on it, idle keep-alive connections closed, exit well within the grace period', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-drain-'));
    writeFileSync(path.join(dir, 'limits.yaml'), SEED_TABLE);
    const gw = await spawnServe(['--config', path.join(dir, 'limits.yaml'), '--upstream', upstream.url]);
    const port = Number(new URL(gw.url).port);

    // An idle keep-alive connection: one answered request, then nothing.
    const idle = rawRequest(port, '/api/v1/statuses/1');
    expect((await idle.answer).head).toMatch(/^HTTP\/1\.1 200/);
    expect((await idle.answer).head).toMatch(/connection: keep-alive/i);
    const busy = rawRequest(port, '/api/v1/slower');
    await waitFor(
      () => upstream.seen.some((r) => r.url === '/api/v1/slower'),
      5_000,
      'the slower request at the upstream',
    );

    const signalled = Date.now();
    gw.child.kill('SIGTERM');
    const idleClosedAt = await idle.closed;
    // At once (500 ms idle, stretched on a loaded machine), and always before the busy request's ~1.3 s are over.
    expect(idleClosedAt - signalled).toBeLessThan(Math.min(scaledMs(500), 1_200));

    const answer = await busy.answer;
    expect(answer.head).toMatch(/^HTTP\/1\.1 200/);
    expect(answer.head).toMatch(/connection: close/i);
    expect(answer.body).toBe('{"slower":true}');
    await busy.closed;
    expect(await gw.exited).toBe(0);
    // The request had ~1.3 s left: the process must not wait out the 10 s grace period (2.5 s idle,
    // stretched on a loaded machine, and always short of the grace).
    expect(Date.now() - signalled).toBeLessThan(Math.min(scaledMs(2_500), 9_000));
  });

  /** The seed table with `server.drainGrace` set, and a gateway serving it. */
  async function gatewayWithDrainGrace(drainGrace: string) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-drain-'));
    writeFileSync(path.join(dir, 'limits.yaml'), `${SEED_TABLE}\nserver:\n  drainGrace: ${drainGrace}\n`);
    return spawnServe(['--config', path.join(dir, 'limits.yaml'), '--upstream', upstream.url]);
  }

  it('cuts what is still running when server.drainGrace ends, and logs it as the gateway’s cut (DRAIN_TIMEOUT), not a client abort', async () => {
    const gw = await gatewayWithDrainGrace('1s');
    const port = Number(new URL(gw.url).port);
    const busy = rawRequest(port, '/api/v1/four-seconds');
    busy.answer.catch(() => undefined);
    await waitFor(
      () => upstream.seen.some((r) => r.url === '/api/v1/four-seconds'),
      5_000,
      'the four-second request at the upstream',
    );
    const signalled = Date.now();
    gw.child.kill('SIGTERM');
    const closedAt = await busy.closed;
    expect(await gw.exited).toBe(0);
    // Cut at the 1 s grace, not after the request's 4 s nor the old fixed 10 s.
    expect(closedAt - signalled).toBeGreaterThanOrEqual(900);
    expect(closedAt - signalled).toBeLessThan(3_500);
    const lines = gw
      .output()
      .split('\n')
      .filter((l) => l.includes('/api/v1/four-seconds'));
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ path: '/api/v1/four-seconds', status: 0, error: 'DRAIN_TIMEOUT' });
    expect(gw.output()).not.toContain('CLIENT_ABORTED');
    expect(gw.output()).toMatch(/"graceMs":1000/);
  });

  it(
    'lets a 12 s request finish at SIGTERM under server.drainGrace: 30s',
    async () => {
      const gw = await gatewayWithDrainGrace('30s');
      const slow = send(gw.url, { path: '/api/v1/twelve-seconds' });
      await waitFor(
        () => upstream.seen.some((r) => r.url === '/api/v1/twelve-seconds'),
        5_000,
        'the twelve-second request at the upstream',
      );
      gw.child.kill('SIGTERM');
      const answer = await slow;
      expect(answer.status).toBe(200);
      expect(answer.body).toBe('{"done":true}');
      expect(await gw.exited).toBe(0);
      expect(gw.output()).not.toContain('DRAIN_TIMEOUT');
    },
    scaledMs(40_000),
  );
});

describe('the drain’s cut, in process', () => {
  it('counts each request the grace period cut in rategate_drain_cut_total, beside its DRAIN_TIMEOUT line', async () => {
    const { logger, lines } = capturingLogger();
    const gw = await startTestGateway(`${SEED_TABLE}\nserver:\n  drainGrace: 300ms\n`, {
      upstream: upstream.url,
      logger,
    });
    const cut = [send(gw.url, { path: '/api/v1/four-seconds' }), send(gw.url, { path: '/api/v1/four-seconds' })].map(
      (p) => p.catch(() => 'reset'),
    );
    await waitFor(
      () => upstream.seen.filter((r) => r.url === '/api/v1/four-seconds').length >= 2,
      5_000,
      'both requests at the upstream',
    );
    await gw.shutdown();
    expect(await Promise.all(cut)).toEqual(['reset', 'reset']);
    await eventually(() => lines.filter((l) => l.error === 'DRAIN_TIMEOUT').length === 2, {
      what: 'two DRAIN_TIMEOUT lines',
    });
    expect(await gw.metrics.registry.getSingleMetricAsString('rategate_drain_cut_total')).toMatch(
      /^rategate_drain_cut_total 2$/m,
    );
  });
});

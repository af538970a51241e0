/**
 * In-flight limits through a real gateway and a real slow upstream: over `max` is refused 429 with
 * Retry-After: 1 before any counting; slots come back however the exchange ends (answer, upstream
 * error, client abort), so 1,000 aborted requests leave `max` admitting.
 */
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { eventually } from '../support/eventually.js';
import { scaledMs } from '../support/speed.js';

const IP = '203.0.113.9';
const KEY = `slow:{ip:${IP}}`;

let upstream: RecordingUpstream;
/** Requests the upstream holds; each answered when released or dropped when its client goes. */
const held: http.ServerResponse[] = [];
let gw: TestGateway;

beforeAll(async () => {
  upstream = await startRecordingUpstream();
  upstream.route('/api/v1/slow', (req, res) => {
    req.resume();
    held.push(res);
    res.on('close', () => held.splice(held.indexOf(res), 1));
  });
  upstream.route('/api/v1/broken', (req) => req.socket.destroy());
  upstream.route('/api/v2/media', (req, res) => {
    req.resume();
    held.push(res);
    res.on('close', () => held.splice(held.indexOf(res), 1));
  });
  gw = await startTestGateway(
    `limits:
  - { name: ip-access, match: /api/*, per: ip, limit: 100000, period: 1h }
concurrency:
  - { name: slow, match: [/api/v1/slow, /api/v1/broken], per: ip, max: 2 }
  - { name: uploads, match: POST /api/v2/media, per: account, max: 1 }
`,
    { upstream: upstream.url },
  );
});
afterAll(async () => {
  await gw.shutdown(100);
  await upstream.close();
});

function get(path: string, ip = IP): Promise<{ status: number; retryAfter: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${gw.url}${path}`, { headers: { 'x-forwarded-for': ip }, agent: false }, (res) => {
      res.resume();
      res.on('end', () =>
        resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'] as string | undefined }),
      );
    });
    req.on('error', reject);
  });
}

function releaseAll(): void {
  for (const res of [...held]) res.end('{}');
}

describe('concurrency: max 2 per IP', () => {
  it('of 5 parallel slow requests, forwards 2 and refuses 3 with 429 and Retry-After: 1', async () => {
    const forwardedBefore = upstream.forwarded().length;
    const answers = Array.from({ length: 5 }, () => get('/api/v1/slow'));
    await eventually(() => held.length === 2, { what: 'two requests held upstream' });
    // The three others are answered while the two are still in flight.
    const settled: { status: number; retryAfter: string | undefined }[] = [];
    for (const a of answers) void a.then((r) => settled.push(r));
    await eventually(() => settled.length === 3, { what: 'three refusals' });
    expect(settled.every((r) => r.status === 429 && r.retryAfter === '1')).toBe(true);
    expect(upstream.forwarded().length - forwardedBefore).toBe(2);
    // Another client is not limited by this one's slots.
    const other = get('/api/v1/slow', '198.51.100.3');
    await eventually(() => held.length === 3, { what: 'the other client forwarded' });
    releaseAll();
    const all = await Promise.all([...answers, other]);
    expect(all.filter((r) => r.status === 200)).toHaveLength(3);
    await eventually(() => gw.guard.slots.inFlight(KEY) === 0, { what: 'slots released' });
  });

  it('releases the slot when the upstream fails (502)', async () => {
    for (let i = 0; i < 5; i++) expect((await get('/api/v1/broken')).status).toBe(502);
    expect(gw.guard.slots.inFlight(KEY)).toBe(0);
  });

  it(
    '1,000 aborted requests leak no slot: max still admits afterwards',
    async () => {
      const head = `GET /api/v1/slow HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: ${IP}\r\n\r\n`;
      for (let batch = 0; batch < 20; batch++) {
        await Promise.all(
          Array.from(
            { length: 50 },
            (_, i) =>
              new Promise<void>((resolve) => {
                const s = net.connect(new URL(gw.url).port as unknown as number, '127.0.0.1', () => {
                  s.write(head);
                  // Some go at once (before or while the gateway reads them), some once held upstream.
                  if (i % 2 === 0) s.destroy();
                  else setTimeout(() => s.destroy(), 1 + (i % 7));
                });
                s.on('close', () => resolve());
                s.on('error', () => resolve());
              }),
          ),
        );
      }
      await eventually(() => gw.guard.slots.inFlight(KEY) === 0, { what: 'every aborted slot released' });
      await eventually(() => held.length === 0, { what: 'upstream requests of aborted clients dropped' });
      const forwardedBefore = upstream.forwarded().length;
      const answers = Array.from({ length: 3 }, () => get('/api/v1/slow'));
      await eventually(() => held.length === 2, { what: 'max (2) admitted again' });
      const first = await Promise.race(answers);
      expect(first).toEqual({ status: 429, retryAfter: '1' });
      expect(upstream.forwarded().length - forwardedBefore).toBe(2);
      releaseAll();
      await Promise.all(answers);
      // Still alive and answering.
      expect((await fetch(`${gw.adminUrl}/healthz`)).status).toBe(200);
      const m = await (await fetch(`${gw.adminUrl}/metrics`)).text();
      expect(m).toMatch(/rategate_concurrency_limited_total\{rule="slow"\} [1-9]/);
    },
    scaledMs(60_000),
  );

  it('per: account counts one account across IPs (the account found by introspection); other accounts pass', async () => {
    const upload = (token: string, ip: string) =>
      fetch(`${gw.url}/api/v2/media`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'x-forwarded-for': ip },
        body: 'x',
      }).then(async (r) => {
        await r.arrayBuffer();
        return r.status;
      });
    const first = upload('user-7', '198.51.100.1');
    await eventually(() => held.length === 1, { what: 'the first upload held upstream' });
    expect(await upload('user-7', '198.51.100.2')).toBe(429);
    const other = upload('user-8', '198.51.100.1');
    await eventually(() => held.length === 2, { what: "another account's upload forwarded" });
    releaseAll();
    expect([await first, await other]).toEqual([200, 200]);
    await eventually(() => gw.guard.slots.inFlight('uploads:{acct:a:7}') === 0, { what: 'slot released' });
  });
});

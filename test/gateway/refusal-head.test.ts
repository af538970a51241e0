/**
 * @module A flood of 429s on one exhausted bucket over one keep-alive connection, through the real
 * gateway on a clock of the test's own: each refusal's headers are those of its own moment (the kept head
 * of pipeline/refusal-head.ts is reused within a second and rebuilt when a value changes), the body is
 * the configured one, and a refusal that must close the connection (a body the gateway will not read)
 * still says so.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeClock } from '../support/clock.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { send } from '../support/http.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';

const TABLE = `limits:
  - { name: api-minute, match: /api/*, per: ip, limit: 1, period: 1m }
  - { name: api-hour, match: /api/*, per: ip, limit: 50, period: 1h }
`;
// 250 ms into a second, so that the steps below cross whole seconds of the window's end.
const clock = new FakeClock(Date.UTC(2026, 10, 21, 19, 0, 0, 250));
let upstream: RecordingUpstream;
let gw: TestGateway;
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

beforeAll(async () => {
  upstream = await startRecordingUpstream();
  gw = await startTestGateway(TABLE, { upstream: upstream.url, now: clock.now });
});
afterAll(async () => {
  agent.destroy();
  await gw.shutdown(200);
  await upstream.close();
});

const WINDOW_END = Date.UTC(2026, 10, 21, 19, 1, 0);
const HOUR_END = Date.UTC(2026, 10, 21, 20, 0, 0);

describe('429s on an exhausted bucket, one connection', () => {
  it('carry the values of their own moment, request after request', async () => {
    const ip = { 'x-forwarded-for': '203.0.113.7' };
    expect((await send(gw.url, { path: '/api/v1/timelines/home', headers: ip, agent })).status).toBe(200);
    // Steps within a second, across seconds, and a long one: each answer's seconds are its own.
    for (const step of [0, 10, 300, 439, 1, 1, 998, 1000, 0, 12_345, 7]) {
      clock.advance(step);
      const r = await send(gw.url, { path: '/api/v1/timelines/home', headers: ip, agent });
      const now = clock.now();
      const left = Math.ceil((WINDOW_END - now) / 1000);
      expect(r.status).toBe(429);
      expect(r.body).toBe('{"error":"Too many requests"}');
      expect(r.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(r.headers['content-length']).toBe(String(r.body.length));
      expect(r.headers['x-ratelimit-limit']).toBe('1');
      expect(r.headers['x-ratelimit-remaining']).toBe('0');
      expect(r.headers['x-ratelimit-reset']).toBe('2026-11-21T19:01:00.000000Z');
      expect(r.headers['retry-after']).toBe(String(left));
      expect(r.headers['ratelimit-policy']).toBe('"api-minute";q=1;w=60, "api-hour";q=50;w=3600');
      expect(r.headers.ratelimit).toBe(
        `"api-minute";r=0;t=${left}, "api-hour";r=49;t=${Math.ceil((HOUR_END - now) / 1000)}`,
      );
      expect(r.headers.connection).toBe('keep-alive');
    }
  });

  it('closes the connection when refusing a request whose body it will not read, and answers after', async () => {
    const ip = { 'x-forwarded-for': '203.0.113.7' };
    const unread = await new Promise<{
      status: number;
      connection: string | undefined;
      retryAfter: string | undefined;
    }>((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port: Number(new URL(gw.url).port),
          method: 'POST',
          path: '/api/v1/statuses',
          headers: { ...ip, 'content-length': '100000' },
          agent: false,
        },
        (res) => {
          res.resume();
          resolve({
            status: res.statusCode ?? 0,
            connection: res.headers.connection,
            retryAfter: res.headers['retry-after'],
          });
        },
      );
      req.on('error', reject);
      req.write('x'.repeat(10)); // the rest never comes: the gateway answers without reading it
    });
    expect(unread.status).toBe(429);
    expect(unread.connection).toBe('close');
    expect(unread.retryAfter).toBe(String(Math.ceil((WINDOW_END - clock.now()) / 1000)));
    // The process is alive and answers on the kept connection.
    expect((await send(gw.url, { path: '/api/v1/timelines/home', headers: ip, agent })).status).toBe(429);
    expect(
      (await send(gw.url, { path: '/api/v1/timelines/home', headers: { 'x-forwarded-for': '203.0.113.8' }, agent }))
        .status,
    ).toBe(200);
  });
});

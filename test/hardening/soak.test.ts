/** Soak: big uploads stream with flat memory; thousands of aborted requests leak no sockets or listeners. */
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { eventually } from '../support/eventually.js';
import { scaledMs } from '../support/speed.js';

let upstream: RecordingUpstream;
let gw: TestGateway;
const TABLE = `limits:\n  - { name: all, match: /*, per: ip, limit: 1000000, period: 1h }\nserver: { maxBodySize: 2GB }\n`;

beforeAll(async () => {
  upstream = await startRecordingUpstream();
  upstream.route('/hang', () => {
    /* never answers: the client gives up first */
  });
  gw = await startTestGateway(TABLE, { upstream: upstream.url });
});
afterAll(async () => {
  await gw.shutdown(200);
  await upstream.close();
});

function connections(server: http.Server): Promise<number> {
  return new Promise((resolve, reject) => server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
}

function handles(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const h of process.getActiveResourcesInfo()) counts[h] = (counts[h] ?? 0) + 1;
  return counts;
}

describe('soak', () => {
  it(
    'streams a 1 GiB upload through the gateway with flat memory',
    async () => {
      const size = 1024 ** 3;
      global.gc?.();
      const before = process.memoryUsage().rss;
      let peak = before;
      const u = new URL(gw.url);
      const answer = await new Promise<string>((resolve, reject) => {
        const r = http.request(
          {
            host: u.hostname,
            port: u.port,
            method: 'POST',
            path: '/upload',
            headers: { 'Content-Length': String(size) },
          },
          (res) => {
            let body = '';
            res.on('data', (c) => (body += c));
            res.on('end', () => resolve(body));
          },
        );
        r.on('error', reject);
        const chunk = Buffer.alloc(1024 * 1024, 7);
        let sent = 0;
        const pump = () => {
          while (sent < size) {
            sent += chunk.length;
            if (sent % (64 * 1024 * 1024) === 0) peak = Math.max(peak, process.memoryUsage().rss);
            if (!r.write(chunk)) return void r.once('drain', pump);
          }
          r.end();
        };
        pump();
      });
      expect(JSON.parse(answer)).toMatchObject({ bodyBytes: size });
      // Client, gateway and upstream share this process: all three together stay far below the body size.
      expect(peak - before).toBeLessThan(200 * 1024 * 1024);
    },
    scaledMs(120_000),
  );

  it(
    'leaks no sockets, handles or listeners after thousands of aborted requests',
    async () => {
      const u = new URL(gw.url);
      const abortOne = () =>
        new Promise<void>((resolve) => {
          const s = net.connect(Number(u.port), u.hostname, () => {
            s.write('GET /hang HTTP/1.1\r\nHost: x\r\n\r\n');
            setTimeout(() => s.destroy(), 5);
          });
          s.on('close', () => resolve());
          s.on('error', () => {});
        });
      // Warm up so pools and caches exist before the baseline.
      for (let i = 0; i < 50; i++) await abortOne();
      // The warm-up's sockets close asynchronously on both hops: the baseline once neither server holds one.
      await eventually(async () => (await connections(gw.server)) + (await connections(upstream.server)), {
        what: 'the warm-up connections closed on both hops',
        until: (n) => n === 0,
      });
      const baseline = handles();
      global.gc?.();
      const heapBefore = process.memoryUsage().heapUsed;

      for (let round = 0; round < 40; round++) await Promise.all(Array.from({ length: 50 }, abortOne));
      // Socket teardown is asynchronous on both hops: give it up to 10 s to settle, no more.
      await eventually(() => handles().TCPSocketWrap ?? 0, {
        what: 'sockets back to the baseline',
        withinMs: 10_000,
        everyMs: 100,
        until: (n) => n <= (baseline.TCPSocketWrap ?? 0) + 4,
      });
      global.gc?.();
      const after = handles();
      // Sockets return to (about) the baseline: aborted requests took their upstream sockets with them.
      expect(after.TCPSocketWrap ?? 0).toBeLessThanOrEqual((baseline.TCPSocketWrap ?? 0) + 4);
      expect(after.Timeout ?? 0).toBeLessThanOrEqual((baseline.Timeout ?? 0) + 10);
      expect(gw.server.listenerCount('request')).toBe(1);
      expect(process.memoryUsage().heapUsed - heapBefore).toBeLessThan(30 * 1024 * 1024);
      // And the gateway still serves.
      const ok = await fetch(`${gw.url}/ok`);
      expect(ok.status).toBe(200);
    },
    scaledMs(120_000),
  );
});

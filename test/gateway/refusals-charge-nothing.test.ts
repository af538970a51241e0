/**
 * Issue 37, part 2: a request refused after its decision charges nothing (SPEC §3.4). One client with
 * 64 keep-alive connections against a slow upstream: the pool's per-client cap (32) refuses most of its
 * requests after their buckets were charged; those charges are given back, so what was forwarded plus
 * what the bucket has left is the limit, on every store, with and without leases. And the pool's 429
 * says what refused it: Retry-After: 1 and none of the buckets' headers (they had room).
 */
import type http from 'node:http';
import net from 'node:net';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { eventually } from '../support/eventually.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { skipRedis, startRedis, type RedisHandle } from '../support/redis.js';
import { scaledMs } from '../support/speed.js';

let upstream: RecordingUpstream;
let redis: RedisHandle | undefined;
const noRedis = skipRedis('refunds on Redis');

/** The upstream holds each answer this long: the pool's connections stay taken. */
const HOLD_MS = 200;
/** Connections of every upstream pool (proxy/forward.ts). */
const POOL = 128;
/** Answers the upstream holds until `release()`. */
const held: http.ServerResponse[] = [];
function release(): void {
  for (const res of held.splice(0)) res.end('{}');
}

beforeAll(async () => {
  upstream = await startRecordingUpstream();
  upstream.route('/api/v1/slow', (req, res) => {
    req.resume();
    setTimeout(() => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{}');
    }, HOLD_MS);
  });
  upstream.route('/api/v1/hold', (req, res) => {
    req.resume();
    res.writeHead(200, { 'Content-Type': 'application/json' });
    held.push(res);
  });
  if (!noRedis) redis = await startRedis();
}, scaledMs(60_000));
afterAll(async () => {
  await upstream.close();
  await redis?.stop();
});

const STORES = [
  { name: 'memory', url: () => 'memory', lease: false, skip: false },
  { name: 'redis with leases', url: () => redis!.url, lease: true, skip: noRedis },
  { name: 'redis without leases', url: () => redis!.url, lease: false, skip: noRedis },
];
let run = 0;

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
}

/** `total` requests from one client over `connections` keep-alive connections, all at once. */
async function burst(gw: TestGateway, ip: string, total: number, connections: number): Promise<Answer[]> {
  const agent = new Agent({ connections, pipelining: 1 });
  try {
    return await Promise.all(
      Array.from({ length: total }, async () => {
        const r = await request(`${gw.url}/api/v1/slow`, { dispatcher: agent, headers: { 'x-forwarded-for': ip } });
        await r.body.dump();
        return { status: r.statusCode, headers: r.headers };
      }),
    );
  } finally {
    await agent.close();
  }
}

async function remaining(gw: TestGateway, ip: string): Promise<number> {
  const r = await fetch(`${gw.adminUrl}/admin/buckets?rule=hourly&key=${ip}`);
  return ((await r.json()) as { remaining: number }).remaining;
}

describe.each(STORES)('one client over 64 connections against the per-client cap, on $name', ({ url, lease, skip }) => {
  it.skipIf(skip)(
    'forwarded + remaining = the limit: the pool’s refusals are given back',
    async () => {
      const gw = await startTestGateway(
        `store: { prefix: "rf${process.pid}-${++run}", timeout: 2s, onError: deny, lease: ${lease} }
server: { maxUpstreamConnectionsPerIp: 32 }
limits:
  - { name: hourly, match: /api/*, per: ip, limit: 1000, period: 1h }
`,
        { upstream: upstream.url, store: url() },
      );
      const ip = `198.51.100.${run}`;
      try {
        const answers = await burst(gw, ip, 400, 64);
        const forwarded = answers.filter((a) => a.status === 200).length;
        const capped = answers.filter((a) => a.status === 429);
        expect(forwarded + capped.length).toBe(400);
        // The cap refused some (else this test tests nothing).
        expect(capped.length).toBeGreaterThan(0);
        expect(upstream.seen.filter((s) => s.url === '/api/v1/slow').length).toBe(forwarded);
        // Leases give back what they still hold within 1.25 s of the last request: the store's count
        // is then the admitted count alone.
        const left = await eventually(() => remaining(gw, ip), {
          what: 'the bucket after the burst',
          withinMs: 5_000,
          until: (r) => forwarded + r === 1000,
        }).catch(() => remaining(gw, ip));
        expect(forwarded + left, `${forwarded} forwarded, ${capped.length} capped, ${left} left`).toBe(1000);
        // Every refusal says it was the cap: retry in a second, and no bucket's figures (they had room).
        for (const a of capped) {
          expect(a.headers['retry-after']).toBe('1');
          expect(a.headers['x-ratelimit-remaining']).toBeUndefined();
        }
        // The gateway is alive and answers.
        expect((await burst(gw, ip, 1, 1))[0]!.status).toBe(200);
      } finally {
        await gw.shutdown(500);
        upstream.seen.length = 0;
      }
    },
    scaledMs(30_000),
  );
});

describe.each(STORES)(
  'one client beyond the pool’s connections with no wait allowed, on $name',
  ({ url, lease, skip }) => {
    it.skipIf(skip)(
      'forwarded + remaining = the limit: the 503s of the wait are given back and say what the bucket holds',
      async () => {
        const gw = await startTestGateway(
          `store: { prefix: "rq${process.pid}-${++run}", timeout: 2s, onError: deny, lease: ${lease} }
server: { maxUpstreamConnectionsPerIp: 0, upstreamQueueTimeout: 0 }
limits:
  - { name: hourly, match: /api/*, per: ip, limit: 1000, period: 1h }
`,
          { upstream: upstream.url, store: url() },
        );
        const ip = `198.51.100.${run}`;
        const agent = new Agent({ connections: 200, pipelining: 1 });
        const get = async (path: string): Promise<Answer> => {
          const r = await request(`${gw.url}${path}`, { dispatcher: agent, headers: { 'x-forwarded-for': ip } });
          await r.body.dump();
          return { status: r.statusCode, headers: r.headers };
        };
        try {
          // The pool's 128 connections held by the upstream; then 40 more find none free and may not wait.
          const holding = Array.from({ length: POOL }, () => get('/api/v1/hold'));
          await eventually(() => held.length, { what: 'the pool held', withinMs: 10_000, until: (n) => n === POOL });
          // One after another: each finds the bucket as the refunds before it left it.
          const busy: Answer[] = [];
          for (let i = 0; i < 40; i++) busy.push(await get('/api/v1/slow'));
          expect(busy.map((a) => a.status)).toEqual(Array(40).fill(503));
          for (const a of busy) {
            expect(a.headers['retry-after']).toBe('1');
            // What the bucket holds with this request given back: what the 128 held ones left.
            expect(a.headers['x-ratelimit-remaining']).toBe(String(1000 - POOL));
          }
          release();
          expect((await Promise.all(holding)).every((a) => a.status === 200)).toBe(true);
          const left = await eventually(() => remaining(gw, ip), {
            what: 'the bucket after the burst',
            withinMs: 5_000,
            until: (r) => POOL + r === 1000,
          }).catch(() => remaining(gw, ip));
          expect(POOL + left, `${left} left`).toBe(1000);
          expect((await get('/api/v1/slow')).status).toBe(200);
        } finally {
          release();
          await agent.close();
          await gw.shutdown(500);
          upstream.seen.length = 0;
        }
      },
      scaledMs(30_000),
    );
  },
);

/** Writes `text` on a fresh connection and closes it at once, without reading the answer. */
function sendAndLeave(gw: TestGateway, text: string): Promise<void> {
  const u = new URL(gw.url);
  return new Promise((resolve) => {
    const sock = net.connect(Number(u.port), u.hostname, () =>
      sock.write(text, () => {
        sock.destroy();
        resolve();
      }),
    );
    sock.on('error', () => resolve());
  });
}

describe.each(STORES)('refused by the cap, then gone, on $name', ({ url, lease, skip }) => {
  it.skipIf(skip)(
    'gives a refused request back once: its client leaving after changes nothing',
    async () => {
      const gw = await startTestGateway(
        `store: { prefix: "ro${process.pid}-${++run}", timeout: 2s, onError: deny, lease: ${lease} }
server: { maxUpstreamConnectionsPerIp: 2 }
limits:
  - { name: hourly, match: /api/*, per: ip, limit: 10, period: 1h }
`,
        { upstream: upstream.url, store: url() },
      );
      const ip = `198.51.100.${run}`;
      const agent = new Agent({ connections: 4, pipelining: 1 });
      try {
        const holding = [0, 1].map(async () =>
          (
            await request(`${gw.url}/api/v1/hold`, { dispatcher: agent, headers: { 'x-forwarded-for': ip } })
          ).body.dump(),
        );
        await eventually(() => held.length, { what: 'two held answers', withinMs: 5_000, until: (n) => n === 2 });
        // Five more from the same client, each refused by the cap as it arrives and its connection closed at once.
        const get = `GET /api/v1/slow HTTP/1.1\r\nHost: gw\r\nX-Forwarded-For: ${ip}\r\n\r\n`;
        for (let i = 0; i < 5; i++) await sendAndLeave(gw, get);
        await eventually(
          async () =>
            (await (await fetch(`${gw.adminUrl}/metrics`)).text()).includes(
              'rategate_upstream_refused_total{reason="per_ip_cap"} 5',
            ),
          {
            what: 'five refusals by the cap',
          },
        );
        // Leases give back what they hold within 1.25 s: then the store holds the two forwarded alone, and no more comes back.
        await eventually(() => remaining(gw, ip), { what: 'the bucket', withinMs: 5_000, until: (r) => r === 8 }).catch(
          () => undefined,
        );
        await new Promise((r) => setTimeout(r, 1_500));
        expect(await remaining(gw, ip)).toBe(8);
        release();
        await Promise.all(holding);
        expect((await burst(gw, ip, 1, 1))[0]!.status).toBe(200);
        expect(await remaining(gw, ip)).toBeLessThanOrEqual(7);
      } finally {
        release();
        await agent.close();
        await gw.shutdown(500);
        upstream.seen.length = 0;
      }
    },
    scaledMs(30_000),
  );
});

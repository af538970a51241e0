/** Forwarding behaviour over real sockets: header hygiene, upstream failures, aborts, streaming. */
import http from 'node:http';
import net from 'node:net';
import { Readable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { send } from '../support/http.js';
import { VERIFY } from '../support/recording-upstream.js';
import { freePort } from '../support/servers.js';
import { SEED_TABLE, startTestGateway, type TestGateway, upstreamFixture } from '../support/gateway.js';

const upstream = upstreamFixture();
const gateways: TestGateway[] = [];

afterEach(async () => {
  await Promise.all(gateways.splice(0).map((g) => g.shutdown(500)));
  upstream.seen.length = 0;
});

async function gateway(yaml = SEED_TABLE, upstreamUrl = upstream.url): Promise<TestGateway> {
  const g = await startTestGateway(yaml, { upstream: upstreamUrl });
  gateways.push(g);
  return g;
}

describe('header hygiene', () => {
  it('drops hop-by-hop headers both ways, including those named in Connection', async () => {
    const gw = await gateway();
    upstream.route('/api/v1/hop', (_req, res) => {
      res.writeHead(200, {
        Connection: 'X-Upstream-Secret',
        'X-Upstream-Secret': 'u',
        'X-Kept': 'k',
        'Content-Type': 'text/plain',
      });
      res.end('ok');
    });
    const a = await send(gw.url, {
      path: '/api/v1/hop',
      headers: {
        Connection: 'close, X-Client-Secret',
        'X-Client-Secret': 'c',
        TE: 'trailers',
        'Proxy-Authorization': 'Basic eA==',
        'X-Passed': 'p',
      },
    });
    expect(a.status).toBe(200);
    expect(a.headers['x-upstream-secret']).toBeUndefined();
    expect(a.headers['x-kept']).toBe('k');
    const seen = upstream.seen.at(-1)!.headers;
    expect(seen['x-client-secret']).toBeUndefined();
    expect(seen.te).toBeUndefined();
    expect(seen['proxy-authorization']).toBeUndefined();
    expect(seen['x-passed']).toBe('p');
    expect(seen['x-forwarded-host']).toBe(new URL(gw.url).host);
  });
});

describe('the Host header upstream', () => {
  it("sends the upstream's own Host by default, and the client's unchanged with upstream.host: client", async () => {
    const own = await gateway();
    await send(own.url, { path: '/api/v1/host', headers: { Host: 'social.example' } });
    expect(upstream.seen.at(-1)!.headers.host).toBe(new URL(upstream.url).host);
    expect(upstream.seen.at(-1)!.headers['x-forwarded-host']).toBe('social.example');
    const kept = await gateway(`${SEED_TABLE}upstream: { host: client }\n`);
    await send(kept.url, { path: '/api/v1/host', headers: { Host: 'social.example' } });
    expect(upstream.seen.at(-1)!.headers.host).toBe('social.example');
    expect(upstream.seen.at(-1)!.headers['x-forwarded-host']).toBe('social.example');
  });
});

describe('upstream failures', () => {
  it('answers 502 JSON with the rate-limit headers when the upstream refuses connections', async () => {
    const port = await freePort();
    const gw = await gateway(SEED_TABLE, `http://127.0.0.1:${port}`);
    const a = await send(gw.url, { path: '/api/v1/statuses/1' });
    expect(a.status).toBe(502);
    expect(a.json()).toEqual({ error: 'Upstream unreachable', code: 'UPSTREAM_UNREACHABLE' });
    expect(a.headers['x-ratelimit-limit']).toBe('300');
  });

  it('answers 504 when the upstream does not answer within upstream.timeout', async () => {
    const gw = await gateway(`${SEED_TABLE}\nupstream: { timeout: 300ms }\n`);
    upstream.route('/api/v1/slow', () => {
      /* never answers */
    });
    const started = Date.now();
    const a = await send(gw.url, { path: '/api/v1/slow' });
    expect(a.status).toBe(504);
    expect(a.json()).toEqual({ error: 'Upstream timed out', code: 'UPSTREAM_TIMEOUT' });
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it('answers 502 when the upstream resets the connection before answering', async () => {
    const gw = await gateway();
    upstream.route('/api/v1/reset', (req) => req.socket.destroy());
    const a = await send(gw.url, { path: '/api/v1/reset' });
    expect(a.status).toBe(502);
  });

  it('cuts the client connection when the upstream resets mid-body, rather than pretend the body was whole', async () => {
    const gw = await gateway();
    upstream.route('/api/v1/half', (req, res) => {
      res.writeHead(200, { 'Content-Length': '1000' });
      res.write('x'.repeat(100));
      setTimeout(() => req.socket.destroy(), 50);
    });
    await expect(send(gw.url, { path: '/api/v1/half' })).rejects.toThrow();
  });
});

describe('client aborts', () => {
  it('aborts the upstream request when the client goes away', async () => {
    const gw = await gateway();
    let upstreamClosed: () => void = () => {};
    let upstreamGotIt: () => void = () => {};
    const closed = new Promise<void>((r) => (upstreamClosed = r));
    const arrived = new Promise<void>((r) => (upstreamGotIt = r));
    upstream.route('/api/v1/hang', (req, res) => {
      res.on('close', () => upstreamClosed());
      upstreamGotIt();
    });
    const u = new URL(gw.url);
    const sock = net.connect(Number(u.port), u.hostname);
    await new Promise((r) => sock.once('connect', r));
    sock.write('GET /api/v1/hang HTTP/1.1\r\nHost: x\r\n\r\n');
    await arrived;
    sock.destroy();
    await expect(
      Promise.race([closed.then(() => 'closed'), new Promise((r) => setTimeout(() => r('still open'), 3000))]),
    ).resolves.toBe('closed');
  });
});

describe('streaming', () => {
  it('streams a large request body to the upstream and its answer back', async () => {
    const gw = await gateway();
    const size = 32 * 1024 * 1024;
    const u = new URL(gw.url);
    const answer = await new Promise<string>((resolve, reject) => {
      const r = http.request(
        {
          host: u.hostname,
          port: u.port,
          method: 'POST',
          path: '/api/v1/upload-echo',
          headers: { 'Content-Length': String(size), 'Content-Type': 'application/octet-stream' },
        },
        (res) => {
          let body = '';
          res.on('data', (c) => (body += c));
          res.on('end', () => resolve(body));
        },
      );
      r.on('error', reject);
      let sent = 0;
      const chunk = Buffer.alloc(1024 * 1024, 97);
      Readable.from(
        (function* () {
          while (sent < size) {
            sent += chunk.length;
            yield chunk;
          }
        })(),
      ).pipe(r);
    });
    expect(JSON.parse(answer)).toMatchObject({ bodyBytes: size });
  });
});

describe('accounts and options', () => {
  it('asks the upstream who owns a token once, then answers from the cache', async () => {
    const gw = await gateway();
    for (let i = 0; i < 5; i++)
      await send(gw.url, { path: '/api/v1/statuses/1', headers: { Authorization: 'Bearer user-42' } });
    expect(upstream.seen.filter((s) => s.url === VERIFY)).toHaveLength(1);
    const a = await send(gw.url, {
      path: '/api/v1/statuses/1',
      headers: { Authorization: 'Bearer user-42', 'X-Forwarded-For': '192.0.2.1' },
    });
    // account-access has counted all six (294 left), ip-access only this one for the new IP.
    expect(a.headers.ratelimit).toMatch(/^"account-access";r=294;t=\d+, "ip-access";r=299;t=\d+$/);
  });

  it('takes the account from a trusted header in header mode, and ignores it from an untrusted peer', async () => {
    const gw = await gateway(`${SEED_TABLE}\nclients: { account: { from: header, header: X-Account-Id } }\n`);
    for (let i = 0; i < 30; i++)
      await send(gw.url, { method: 'POST', path: '/api/v1/media', headers: { 'X-Account-Id': 'alice' } });
    expect(
      (await send(gw.url, { method: 'POST', path: '/api/v1/media', headers: { 'X-Account-Id': 'alice' } })).status,
    ).toBe(429);
    expect(
      (await send(gw.url, { method: 'POST', path: '/api/v1/media', headers: { 'X-Account-Id': 'bob' } })).status,
    ).toBe(200);
    const untrusted = await gateway(
      `${SEED_TABLE}\nclients: { trustedProxies: [], account: { from: header, header: X-Account-Id } }\n`,
    );
    const a = await send(untrusted.url, {
      method: 'POST',
      path: '/api/v1/media',
      headers: { 'X-Account-Id': 'alice' },
    });
    expect(a.headers['ratelimit-policy']).toBe('"ip-access";q=300;w=300');
  });

  it('skips every limit for exempt IPs and accounts', async () => {
    const gw = await gateway(`${SEED_TABLE}\nexempt: { ips: [192.0.2.0/24], accounts: ['77'] }\n`);
    for (let i = 0; i < 7; i++) {
      const a = await send(gw.url, {
        method: 'POST',
        path: '/api/v1/accounts',
        headers: { 'X-Forwarded-For': '192.0.2.9' },
      });
      expect(a.status).toBe(200);
      expect(a.headers['x-ratelimit-limit']).toBeUndefined();
    }
    const b = await send(gw.url, { path: '/api/v1/statuses/1', headers: { Authorization: 'Bearer user-77' } });
    expect(b.headers['x-ratelimit-limit']).toBeUndefined();
    const c = await send(gw.url, { path: '/api/v1/statuses/1', headers: { Authorization: 'Bearer user-78' } });
    expect(c.headers['x-ratelimit-limit']).toBe('300');
  });

  it('counts a shadow rule without ever rejecting, and reports it in the metrics', async () => {
    const gw = await gateway(
      `limits:\n  - { name: dry-run, match: /api/*, per: ip, limit: 2, period: 1h, shadow: true }\n`,
    );
    for (let i = 0; i < 5; i++) {
      const a = await send(gw.url, { path: '/api/v1/statuses/1' });
      expect(a.status).toBe(200);
      expect(a.headers['x-ratelimit-limit']).toBeUndefined();
    }
    const metrics = await (await fetch(`${gw.adminUrl}/metrics`)).text();
    expect(metrics).toContain('rategate_requests_total{rule="dry-run",decision="allowed"} 2');
    expect(metrics).toContain('rategate_requests_total{rule="dry-run",decision="shadow_limited"} 3');
  });

  it('formats the reset as Unix seconds or as seconds from now on request', async () => {
    const unix = await gateway(`${SEED_TABLE}\nresponses: { reset: unix, standardHeaders: false }\n`);
    const a = await send(unix.url, { path: '/api/v1/statuses/1' });
    const reset = Number(a.headers['x-ratelimit-reset']);
    expect(reset % 300).toBe(0);
    expect(reset * 1000).toBeGreaterThan(Date.now());
    expect(reset * 1000).toBeLessThanOrEqual(Date.now() + 300_000);
    expect(a.headers.ratelimit).toBeUndefined();
    const delta = await gateway(`${SEED_TABLE}\nresponses: { reset: delta }\n`);
    const d = Number((await send(delta.url, { path: '/api/v1/statuses/1' })).headers['x-ratelimit-reset']);
    expect(d).toBeGreaterThanOrEqual(0);
    expect(d).toBeLessThanOrEqual(300);
  });

  it('answers 429 with the configured body', async () => {
    const gw = await gateway(
      `limits:\n  - { name: one, match: /x, per: global, limit: 1, period: 1h }\nresponses: { body: { error: Slow down, code: 42 } }\n`,
    );
    await send(gw.url, { path: '/x' });
    const a = await send(gw.url, { path: '/x' });
    expect(a.status).toBe(429);
    expect(a.body).toBe('{"error":"Slow down","code":42}');
  });
});

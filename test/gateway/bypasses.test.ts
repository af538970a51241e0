/**
 * Ways around the limit table found by trying the gateway as an attacker would; each test is named after
 * the bypass and runs through the real gateway against a recording upstream.
 */
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { startTestGateway, gatewayFixture } from '../support/gateway.js';
import { VERIFY } from '../support/recording-upstream.js';

const fx = gatewayFixture({ graceMs: 200 });

/** Sends a head with `Expect: 100-continue`, then the body only if the gateway says 100. */
async function expectContinue(url: string, path: string, body: Buffer): Promise<{ first: string; final: string }> {
  const { port } = new URL(url);
  const socket = net.connect(Number(port), '127.0.0.1');
  await new Promise((r) => socket.once('connect', r));
  socket.write(
    `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer user-7\r\nContent-Type: application/octet-stream\r\n` +
      `Content-Length: ${body.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`,
  );
  let text = '';
  let first = '';
  return new Promise((resolve, reject) => {
    socket.on('data', (chunk: Buffer) => {
      if (first === '') {
        first = chunk.toString('latin1');
        if (first.startsWith('HTTP/1.1 100')) {
          socket.write(body);
          const rest = first.slice(first.indexOf('\r\n\r\n') + 4);
          text += rest;
          return;
        }
      }
      text += chunk.toString('latin1');
    });
    socket.once('close', () =>
      resolve({ first, final: first.startsWith('HTTP/1.1 100') ? text : first + text.slice(first.length) }),
    );
    socket.once('error', reject);
  });
}

describe('Expect: 100-continue', () => {
  const TABLE = `limits:\n  - { name: uploading, match: POST /api/v1/media, per: account, limit: 1, period: 30m }\n`;

  it('an admitted 2 MiB upload gets 100 Continue from the gateway, streams to the upstream, answers 200, and is charged once', async () => {
    fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url });
    const body = Buffer.alloc(2 * 1024 * 1024, 7);
    const { first, final } = await expectContinue(fx.gw.url, '/api/v1/media', body);
    expect(first).toMatch(/^HTTP\/1\.1 100 Continue\r\n/);
    expect(final).toMatch(/^HTTP\/1\.1 200 /);
    expect(final).toMatch(/x-ratelimit-remaining: 0/i);
    const uploads = fx.upstream.forwarded().filter((s) => s.url === '/api/v1/media');
    expect(uploads.at(-1)!.bodyBytes).toBe(body.length);
    expect(uploads.at(-1)!.headers.expect).toBeUndefined();
  });

  it('over the limit, the first byte back is the 429, never a 100 Continue, and no body is read', async () => {
    fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url });
    const body = Buffer.alloc(2 * 1024 * 1024, 7);
    await expectContinue(fx.gw.url, '/api/v1/media', body);
    const before = fx.upstream.forwarded().length;
    const { first } = await expectContinue(fx.gw.url, '/api/v1/media', body);
    expect(first).toMatch(/^HTTP\/1\.1 429 /);
    expect(first).toMatch(/retry-after: \d+/i);
    expect(fx.upstream.forwarded().length).toBe(before);
  });
});

describe('a flood that is already refused costs the upstream nothing', () => {
  it('20 requests from an IP over its limit, each with a new token, make no introspection call', async () => {
    const TABLE = `limits:
  - { name: ip-access, match: /api/*, per: ip, limit: 2, period: 5m }
  - { name: account-access, match: /api/*, per: account, limit: 300, period: 5m }
`;
    fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url });
    const introspections = () => fx.upstream.seen.filter((s) => s.url === VERIFY).length;
    for (const token of ['user-1', 'user-2']) {
      const res = await fetch(`${fx.gw.url}/api/v1/timelines/home`, { headers: { Authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
    }
    const before = introspections();
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`${fx.gw.url}/api/v1/timelines/home`, {
        headers: { Authorization: `Bearer user-${100 + i}` },
      });
      expect(res.status).toBe(429);
      expect(res.headers.get('x-ratelimit-limit')).toBe('2');
      expect(res.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    }
    expect(introspections() - before).toBeLessThanOrEqual(1);
  });

  it('a request the IP bucket still has room for is counted all-or-nothing after introspection', async () => {
    const TABLE = `limits:
  - { name: ip-access, match: /api/*, per: ip, limit: 3, period: 5m }
  - { name: account-access, match: /api/*, per: account, limit: 1, period: 5m }
`;
    fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url });
    const get = (token: string) =>
      fetch(`${fx.gw!.url}/api/v1/timelines/home`, { headers: { Authorization: `Bearer ${token}` } });
    expect((await get('user-50')).status).toBe(200);
    // The account bucket refuses: the IP bucket must not be charged for it.
    expect((await get('user-50')).status).toBe(429);
    expect((await get('user-51')).status).toBe(200);
    const third = await get('user-52');
    expect(third.status).toBe(200);
    expect(third.headers.get('x-ratelimit-remaining')).toBe('0');
  });
});

describe('a token sent outside the Authorization header counts for its account', () => {
  const TABLE = `limits:\n  - { name: account-access, match: /api/*, per: account, limit: 2, period: 5m }\n`;
  const sources: Array<[string, (token: string) => [string, RequestInit]]> = [
    ['the query string (access_token)', (t) => [`/api/v1/timelines/home?access_token=${t}`, {}]],
    ['the query string (bearer_token)', (t) => [`/api/v1/timelines/home?bearer_token=${t}`, {}]],
    [
      'a URL-encoded form body',
      (t) => [
        '/api/v1/statuses',
        {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: `status=hi&access_token=${t}`,
        },
      ],
    ],
    [
      'a JSON body',
      (t) => [
        '/api/v1/statuses',
        {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ status: 'hi', access_token: t }),
        },
      ],
    ],
    [
      'a multipart field',
      (t) => {
        const form = new FormData();
        form.set('access_token', t);
        form.set('file', new Blob([Buffer.alloc(1000, 1)], { type: 'image/png' }), 'a.png');
        return ['/api/v1/media', { method: 'POST', body: form }];
      },
    ],
  ];
  it.each(sources)(
    'in %s: the third request of one account is refused, the body forwarded byte for byte',
    async (_where, make) => {
      fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url });
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) {
        const [path, init] = make('user-77');
        statuses.push((await fetch(fx.gw.url + path, init)).status);
      }
      expect(statuses).toEqual([200, 200, 429]);
      const sent = fx.upstream.forwarded().at(-1)!;
      if (sent.method === 'POST') {
        expect(sent.bodyBytes).toBeGreaterThan(0);
        expect(sent.bodyBytes).toBe(Number(sent.headers['content-length']));
      }
      const [path, init] = make('user-78');
      expect((await fetch(fx.gw.url + path, init)).status).toBe(200); // another account has its own bucket
    },
  );

  it('a token in a body past the peek bound is refused with 400, never forwarded uncounted', async () => {
    fx.gw = await startTestGateway(`server: { paramPeekBytes: 1kB }\n${TABLE}`, { upstream: fx.upstream.url });
    const before = fx.upstream.forwarded().length;
    const res = await fetch(`${fx.gw.url}/api/v1/statuses`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `status=${'x'.repeat(4000)}&access_token=user-79`,
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toMatch(/Authorization header/);
    expect(fx.upstream.forwarded().length).toBe(before);
  });
});

describe("Rack's method override is counted as the method Rails routes", () => {
  const TABLE = `limits:\n  - { name: deletion, match: DELETE /api/v1/statuses/:id, per: ip, limit: 1, period: 30m }\n`;
  it('a POST with X-HTTP-Method-Override: DELETE counts against the deletion limit, and keeps the header', async () => {
    fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url });
    const del = () =>
      fetch(`${fx.gw!.url}/api/v1/statuses/5`, { method: 'POST', headers: { 'X-HTTP-Method-Override': 'DELETE' } });
    expect((await del()).status).toBe(200);
    expect(fx.upstream.forwarded().at(-1)!.headers['x-http-method-override']).toBe('DELETE');
    expect((await del()).status).toBe(429);
  });

  it('a POST with _method=delete in its form body counts against the deletion limit', async () => {
    fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url });
    const del = () =>
      fetch(`${fx.gw!.url}/api/v1/statuses/6`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: '_method=delete',
      });
    expect((await del()).status).toBe(200);
    expect(fx.upstream.forwarded().at(-1)!.bodyBytes).toBe('_method=delete'.length);
    expect((await del()).status).toBe(429);
  });

  it('an override the gateway does not count by never reaches the upstream', async () => {
    fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url });
    // Rack honours the form field over the header, and no override on a GET: the header is dropped.
    await fetch(`${fx.gw.url}/api/v1/statuses/7`, {
      method: 'POST',
      headers: { 'X-HTTP-Method-Override': 'PATCH', 'content-type': 'application/x-www-form-urlencoded' },
      body: '_method=delete',
    });
    expect(fx.upstream.forwarded().at(-1)!.headers['x-http-method-override']).toBeUndefined();
    await fetch(`${fx.gw.url}/api/v1/statuses/8`, { headers: { 'X-HTTP-Method-Override': 'DELETE' } });
    expect(fx.upstream.forwarded().at(-1)!.headers['x-http-method-override']).toBeUndefined();
  });
});

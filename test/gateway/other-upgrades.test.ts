/**
 * An `Upgrade` other than `websocket` (e.g. `h2c`, which the real `curl --http2` sends to an `http://`
 * URL) is served as an ordinary HTTP/1.1 request: the server may ignore an upgrade (RFC 9110 §7.8).
 */
import { execFile } from 'node:child_process';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { capturingLogger, startTestGateway, type TestGateway, upstreamFixture } from '../support/gateway.js';
import { eventually } from '../support/eventually.js';

const upstream = upstreamFixture();
let gw: TestGateway;

const TABLE = `limits:\n  - { name: api, match: /api/*, per: ip, limit: 10, period: 1h }\n`;

afterEach(async () => gw.shutdown(200));

/** Runs the real curl; resolves with its stdout (the body, then `-w`'s trailer) and stderr (the verbose trace). */
function curl(args: string[]): Promise<{ out: string; err: string }> {
  return new Promise((resolve, reject) => {
    execFile('curl', ['-sS', '--max-time', '10', ...args], { encoding: 'utf8' }, (e, out, err) =>
      e ? reject(new Error(`${e.message}\n${err}`)) : resolve({ out, err }),
    );
  });
}

/**
 * Writes `text` on one connection and collects what comes back until the server closes it or `ms`
 * passes (then `closed` is false). Written, not ended: a client's half-close aborts its in-flight
 * requests in node:http.
 */
function exchange(url: string, text: string, ms = 5000): Promise<{ out: string; closed: boolean }> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1', () => socket.write(text));
    let out = '';
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ out, closed: false });
    }, ms);
    socket.on('data', (c) => (out += c));
    socket.once('close', () => {
      clearTimeout(timer);
      resolve({ out, closed: true });
    });
    socket.once('error', reject);
  });
}

describe('an Upgrade other than websocket', () => {
  it('curl --http2 against http:// is answered over HTTP/1.1, counted once, logged once', async () => {
    const { logger, lines } = capturingLogger();
    gw = await startTestGateway(TABLE, { upstream: upstream.url, logger });
    const r = await curl(['-v', '--http2', '-w', '\n%{http_code} %{http_version}', `${gw.url}/api/v1/instance`]);
    // curl really asked for h2c.
    expect(r.err).toMatch(/Upgrade: h2c/i);
    const [body, trailer] = r.out.split('\n');
    expect(trailer).toBe('200 1.1');
    expect(JSON.parse(body!)).toMatchObject({ method: 'GET', url: '/api/v1/instance' });
    expect(r.err).toMatch(/x-ratelimit-remaining: 9/i);
    // The upstream saw an ordinary request: no Upgrade, no HTTP2-Settings.
    const seen = upstream.forwarded().at(-1)!;
    expect(seen.headers.upgrade).toBeUndefined();
    expect(seen.headers['http2-settings']).toBeUndefined();
    const access = lines.filter((l) => l.msg === 'request');
    expect(access.map((l) => [l.method, l.path, l.status, l.decision])).toEqual([
      ['GET', '/api/v1/instance', 200, 'allowed'],
    ]);
  });

  it('keeps the connection usable: two requests on it, a body with one, each counted once', async () => {
    gw = await startTestGateway(TABLE, { upstream: upstream.url });
    const two = await curl(['-v', '--http2', `${gw.url}/api/v1/a`, `${gw.url}/api/v1/b`]);
    expect(two.out).toContain('"url":"/api/v1/a"');
    expect(two.out).toContain('"url":"/api/v1/b"');
    expect(two.err).toMatch(/x-ratelimit-remaining: 8/i);
    const post = await curl([
      '-v',
      '--http2',
      '-d',
      'status=hello',
      '-w',
      '\n%{http_code}',
      `${gw.url}/api/v1/statuses`,
    ]);
    expect(post.out).toContain('"bodyBytes":12');
    expect(post.err).toMatch(/x-ratelimit-remaining: 7/i);
  });

  it('an unknown upgrade on a limited route is answered 429, and the gateway still serves', async () => {
    gw = await startTestGateway(`limits:\n  - { name: api, match: /api/*, per: ip, limit: 1, period: 1h }\n`, {
      upstream: upstream.url,
    });
    await curl(['--http2', `${gw.url}/api/v1/x`]);
    const limited = await curl(['--http2', '-w', '\n%{http_code}', `${gw.url}/api/v1/x`]);
    expect(limited.out.split('\n').at(-1)).toBe('429');
    expect((await fetch(`${gw.url}/other`)).status).toBe(200);
  });

  it('re-parses the head as strictly as any request: a smuggling attempt is refused 400, a pipelined request behind an upgrade is served', async () => {
    gw = await startTestGateway(TABLE, { upstream: upstream.url });
    const { port } = new URL(gw.url);
    const exchange = (text: string): Promise<string> =>
      new Promise((resolve, reject) => {
        // Written, not ended: a client's half-close aborts its in-flight requests in node:http. Each
        // exchange ends with the server closing (a 400, or `Connection: close` on the last request).
        const socket = net.connect(Number(port), '127.0.0.1', () => socket.write(text));
        let out = '';
        socket.on('data', (c) => (out += c));
        socket.once('close', () => resolve(out));
        socket.once('error', reject);
      });
    const smuggle = await exchange(
      'POST /api/v1/statuses HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: foo\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /api/v1/hidden HTTP/1.1\r\nHost: x\r\n\r\n',
    );
    expect(smuggle).toMatch(/^HTTP\/1\.1 400 /);
    expect(upstream.forwarded().some((s) => s.url === '/api/v1/hidden')).toBe(false);
    const pipelined = await exchange(
      'GET /api/v1/first HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\nGET /api/v1/second HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    );
    expect(pipelined.match(/HTTP\/1\.1 200 /g)?.length, pipelined).toBe(2);
    expect(upstream.forwarded().map((s) => s.url)).toEqual(expect.arrayContaining(['/api/v1/first', '/api/v1/second']));
    expect((await fetch(`${gw.url}/api/v1/alive`)).status).toBe(200);
  });
});

describe('an Upgrade pipelined behind another request, and Connection naming the framing (issue 27, item 6)', () => {
  it('answers an h2c upgrade pipelined behind another request, in order, and honours its Connection: close', async () => {
    gw = await startTestGateway(TABLE, { upstream: upstream.url });
    // Before issue 27: the second request was forwarded and counted, its answer never sent; the connection hung ~65 s.
    const r = await exchange(
      gw.url,
      'GET /api/v1/one HTTP/1.1\r\nHost: x\r\n\r\nGET /api/v1/two HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings, close\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n',
    );
    expect(r.closed, r.out).toBe(true);
    const statuses = [...r.out.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1]);
    expect(statuses).toEqual(['200', '200']);
    expect(r.out.indexOf('"url":"/api/v1/one"')).toBeLessThan(r.out.indexOf('"url":"/api/v1/two"'));
    expect(r.out).toMatch(/x-ratelimit-remaining: 8/i);
  });

  it('answers several pipelined upgrades and plain requests, each once, in order', async () => {
    gw = await startTestGateway(TABLE, { upstream: upstream.url });
    const up = (path: string, last = false): string =>
      `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade${last ? ', close' : ''}\r\nUpgrade: h2c\r\n\r\n`;
    const r = await exchange(
      gw.url,
      `GET /api/v1/p1 HTTP/1.1\r\nHost: x\r\n\r\n${up('/api/v1/p2')}GET /api/v1/p3 HTTP/1.1\r\nHost: x\r\n\r\n${up('/api/v1/p4', true)}`,
    );
    expect(r.closed, r.out).toBe(true);
    const urls = [...r.out.matchAll(/"url":"([^"]+)"/g)].map((m) => m[1]);
    expect(urls).toEqual(['/api/v1/p1', '/api/v1/p2', '/api/v1/p3', '/api/v1/p4']);
    expect(upstream.forwarded().filter((s) => /^\/api\/v1\/p[1-4]$/.test(s.url))).toHaveLength(4);
  });

  it('answers 400 to an upgrade whose Connection names Content-Length, and forwards nothing of it (no desync)', async () => {
    gw = await startTestGateway(TABLE, { upstream: upstream.url });
    const hidden = 'GET /api/v1/smuggled HTTP/1.1\r\nHost: x\r\n\r\n';
    const r = await exchange(
      gw.url,
      `POST /api/v1/framed HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, Content-Length\r\nUpgrade: h2c\r\nContent-Type: text/plain\r\nContent-Length: ${hidden.length}\r\n\r\n${hidden}`,
    );
    expect(r.out).toMatch(/^HTTP\/1\.1 400 /);
    expect(r.out.match(/HTTP\/1\.1 /g)).toHaveLength(1);
    expect(r.closed).toBe(true);
    expect(upstream.forwarded().some((s) => s.url === '/api/v1/smuggled' || s.url === '/api/v1/framed')).toBe(false);
    expect((await fetch(`${gw.url}/api/v1/alive`)).status).toBe(200);
  });

  it('answers 400 to any request whose Connection names Content-Length, Transfer-Encoding or Host, upgrade or not', async () => {
    gw = await startTestGateway(TABLE, { upstream: upstream.url });
    const before = upstream.forwarded().length;
    for (const named of ['Content-Length', 'transfer-encoding', 'Host', 'keep-alive, HOST']) {
      for (const upgrade of ['', 'Upgrade: h2c\r\n']) {
        const connection = upgrade === '' ? named : `Upgrade, ${named}`;
        const r = await exchange(
          gw.url,
          `POST /api/v1/statuses HTTP/1.1\r\nHost: x\r\nConnection: ${connection}\r\n${upgrade}Content-Length: 2\r\n\r\nab`,
        );
        expect(r.out, `${connection} ${upgrade}`).toMatch(/^HTTP\/1\.1 400 /);
        // Its framing is in doubt: the connection is not used again.
        expect(r.closed).toBe(true);
      }
    }
    expect(upstream.forwarded().length).toBe(before);
  });

  it('survives a client that resets the connection while its pipelined upgrade waits for the answer before it', async () => {
    gw = await startTestGateway(TABLE, { upstream: upstream.url });
    let answered = 0;
    let arrived = false;
    upstream.route('/api/v1/slow-first', (_req, res) => {
      arrived = true;
      // Answers after the client is gone: the upgrade behind it waits on a socket with no listener of node:http's.
      setTimeout(() => {
        answered++;
        res.end('{}');
      }, 300);
    });
    const { port } = new URL(gw.url);
    const socket = net.connect(Number(port), '127.0.0.1');
    socket.on('error', () => undefined);
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(
      'GET /api/v1/slow-first HTTP/1.1\r\nHost: x\r\n\r\nGET /api/v1/behind HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n',
    );
    // Both requests parsed (one packet), the first one at the upstream.
    await eventually(() => arrived, { what: 'the first request at the upstream' });
    socket.resetAndDestroy();
    await eventually(() => answered > 0, { what: 'the first request answered by the upstream' });
    expect((await fetch(`${gw.url}/api/v1/alive`)).status).toBe(200);
    expect(upstream.forwarded().some((s) => s.url === '/api/v1/behind')).toBe(false);
  });
});

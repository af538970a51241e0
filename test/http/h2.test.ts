/**
 * HTTP/2 on the real gateway, one pipeline with HTTP/1.1: over TLS (ALPN h2, beside http/1.1 on the same
 * port, with a CA made at test time) and with prior knowledge on the plain port (h2c). The seed table's
 * sign-up bar, the 429's headers and body, the access line (with its protocol), what the upstream is
 * told, a body sent without a length, an upstream's hop-by-hop headers kept off the HTTP/2 answer;
 * node's client, curl and h2load.
 */
import { execFile, spawnSync } from 'node:child_process';
import http2 from 'node:http2';
import https from 'node:https';
import net from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { capturingLogger, SEED_TABLE, startTestGateway, type LogLine, type TestGateway } from '../support/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { makeTestCa, type TestCa } from '../support/test-ca.js';
import { eventually } from '../support/eventually.js';

const run = promisify(execFile);
/** Whether to skip a test for want of a tool: under CI=true a missing tool fails instead (.ci/run installs them). */
function missing(tool: string, present: boolean): boolean {
  if (present) return false;
  if (process.env.CI === 'true') throw new Error(`the HTTP/2 tests need ${tool}, and CI=true`);
  console.warn(`\n*** SKIPPING the ${tool} tests: ${tool} is missing ***\n`);
  return true;
}
// Before the gateway starts: a synchronous child holds no event loop that serves anything yet.
const noCurl = missing('curl with HTTP2', /HTTP2/.test(spawnSync('curl', ['-V']).stdout?.toString() ?? ''));
const noH2load = missing('h2load', spawnSync('h2load', ['--version']).status === 0);

let ca: TestCa;
let upstream: RecordingUpstream;
let tlsGw: TestGateway;
let plainGw: TestGateway;
let lines: LogLine[];

beforeAll(async () => {
  ca = await makeTestCa();
  upstream = await startRecordingUpstream();
  const captured = capturingLogger();
  lines = captured.lines;
  tlsGw = await startTestGateway(
    `${SEED_TABLE}server:\n  tls: { certFile: ${ca.certFile}, keyFile: ${ca.keyFile} }\n`,
    {
      upstream: upstream.url,
      logger: captured.logger,
    },
  );
  plainGw = await startTestGateway(SEED_TABLE, { upstream: upstream.url, logger: captured.logger });
});
afterAll(async () => {
  await tlsGw?.shutdown(200);
  await plainGw?.shutdown(200);
  await upstream?.close();
});

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request on an HTTP/2 session: its status, headers (lower-case, as HTTP/2 has them) and body. */
function h2Request(
  session: http2.ClientHttp2Session,
  headers: http2.OutgoingHttpHeaders,
  body?: string,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = session.request(headers, { endStream: body === undefined });
    let text = '';
    let got: http2.IncomingHttpHeaders = {};
    req.on('response', (h) => (got = h));
    req.setEncoding('utf8');
    req.on('data', (c: string) => (text += c));
    req.on('end', () => resolve({ status: Number(got[':status']), headers: got, body: text }));
    req.on('error', reject);
    if (body !== undefined) req.end(body);
  });
}

function connectTls(): Promise<http2.ClientHttp2Session> {
  return connected(http2.connect(tlsGw.url, { ca: ca.ca, servername: 'gw.test' }));
}

function connected(session: http2.ClientHttp2Session): Promise<http2.ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    session.once('connect', () => resolve(session));
    session.once('error', reject);
  });
}

/** One HTTP/1.1 request over TLS, ALPN offering http/1.1 only (node's https client). */
function https1(method: string, urlPath: string, body?: string): Promise<Answer> {
  const port = Number(new URL(tlsGw.url).port);
  return new Promise((resolve, reject) => {
    const req = https.request(
      { host: '127.0.0.1', port, method, path: urlPath, ca: ca.ca, servername: 'gw.test', agent: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const accessLineOf = (id: string): Promise<LogLine> =>
  eventually(() => lines.find((l) => l.msg === 'request' && l.id === id), {
    what: `the access line of ${id}`,
    until: (l) => l !== undefined,
  }) as Promise<LogLine>;

/** The rate-limit answer's headers, without the ones that differ by the moment (date, reset). */
function limitHeaders(h: Answer['headers']): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(h)) {
    const name = k.toLowerCase();
    if (
      name.startsWith(':') ||
      ['date', 'connection', 'keep-alive', 'x-ratelimit-reset', 'retry-after', 'ratelimit'].includes(name)
    )
      continue;
    out[name] = v;
  }
  return out;
}

describe('HTTP/2 over TLS (ALPN h2)', () => {
  it('is negotiated beside http/1.1 on the one port, and answers through the pipeline with lower-case rate-limit headers', async () => {
    const session = await connectTls();
    try {
      expect(session.alpnProtocol).toBe('h2');
      const a = await h2Request(session, { ':path': '/api/v1/statuses/1', 'x-request-id': 'h2-tls-1' });
      expect(a.status).toBe(200);
      expect(a.headers['x-ratelimit-limit']).toBe('300');
      const seen = upstream.seen.find((s) => s.headers['x-request-id'] === 'h2-tls-1')!;
      // The upstream speaks HTTP/1.1: a Host (from :authority), no pseudo-header, the scheme the client used.
      expect(seen.headers.host).toBeDefined();
      expect(Object.keys(seen.headers).some((k) => k.startsWith(':'))).toBe(false);
      expect(seen.headers['x-forwarded-proto']).toBe('https');
      expect(await accessLineOf('h2-tls-1')).toMatchObject({
        protocol: 'h2',
        status: 200,
        method: 'GET',
        path: '/api/v1/statuses/1',
      });
    } finally {
      session.close();
    }
    const h1 = await https1('GET', '/api/v1/statuses/2');
    expect(h1.status).toBe(200);
    expect(h1.headers['x-ratelimit-limit']).toBe('300');
  });

  it('enforces the seed table as HTTP/1.1 does: the sixth sign-up is 429, with the headers and body HTTP/1.1 gets', async () => {
    const session = await connectTls();
    try {
      const answers: Answer[] = [];
      for (let i = 0; i < 6; i++)
        answers.push(
          await h2Request(
            session,
            { ':method': 'POST', ':path': '/api/v1/accounts', 'content-type': 'application/json' },
            '{"username":"a"}',
          ),
        );
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 429]);
      const h2Refusal = answers[5]!;
      // The same bucket, asked once more over HTTP/1.1 on the same port.
      const h1Refusal = await https1('POST', '/api/v1/accounts', '{"username":"a"}');
      expect(h1Refusal.status).toBe(429);
      expect(h2Refusal.body).toBe(h1Refusal.body);
      expect(limitHeaders(h2Refusal.headers)).toEqual(limitHeaders(h1Refusal.headers));
      expect(h2Refusal.headers['retry-after']).toBeDefined();
      expect(h2Refusal.headers['x-ratelimit-remaining']).toBe('0');
    } finally {
      session.close();
    }
  });

  it('keeps an upstream’s connection-specific headers off the HTTP/2 answer', async () => {
    upstream.route('/api/v1/hop', (_req, res) => {
      res.writeHead(200, {
        'Content-Type': 'text/plain',
        Connection: 'keep-alive, X-Hop',
        'Keep-Alive': 'timeout=5',
        'X-Hop': '1',
        Upgrade: 'h2c',
        'Proxy-Connection': 'keep-alive',
      });
      res.end('hop');
    });
    const session = await connectTls();
    try {
      const a = await h2Request(session, { ':path': '/api/v1/hop' });
      expect(a).toMatchObject({ status: 200, body: 'hop' });
      for (const h of ['connection', 'keep-alive', 'x-hop', 'upgrade', 'proxy-connection', 'transfer-encoding'])
        expect(a.headers[h]).toBeUndefined();
      // The session is still usable after it.
      expect((await h2Request(session, { ':path': '/api/v1/statuses/3' })).status).toBe(200);
    } finally {
      session.close();
    }
  });

  it.skipIf(noCurl)('is spoken by curl --http2, verifying the test CA', async () => {
    const { stdout } = await run('curl', [
      '-sS',
      '--http2',
      '--cacert',
      ca.caFile,
      '--resolve',
      `gw.test:${new URL(tlsGw.url).port}:127.0.0.1`,
      '-o',
      '/dev/null',
      '-w',
      '%{http_version} %{http_code}',
      `https://gw.test:${new URL(tlsGw.url).port}/api/v1/statuses/4`,
    ]);
    expect(stdout).toBe('2 200');
  });
});

describe('HTTP/2 with prior knowledge on the plain port (h2c)', () => {
  it('is told apart from HTTP/1.1 by its preface, and answers through the pipeline', async () => {
    const session = await connected(http2.connect(plainGw.url));
    try {
      const a = await h2Request(session, { ':path': '/api/v1/statuses/5', 'x-request-id': 'h2c-1' });
      expect(a.status).toBe(200);
      expect(a.headers['x-ratelimit-limit']).toBe('300');
      expect(await accessLineOf('h2c-1')).toMatchObject({ protocol: 'h2c', status: 200 });
      expect(upstream.seen.find((s) => s.headers['x-request-id'] === 'h2c-1')!.headers['x-forwarded-proto']).toBe(
        'http',
      );
    } finally {
      session.close();
    }
    const h1 = await fetch(`${plainGw.url}/api/v1/statuses/6`, { headers: { 'x-request-id': 'h1-plain' } });
    expect(h1.status).toBe(200);
    expect(await accessLineOf('h1-plain')).toMatchObject({ protocol: 'http/1.1', status: 200 });
  });

  it('forwards a body sent without a length, counted as it streams, and joins split cookies', async () => {
    const session = await connected(http2.connect(plainGw.url));
    try {
      const req = session.request({
        ':method': 'POST',
        ':path': '/api/v1/statuses',
        'content-type': 'application/octet-stream',
        cookie: ['a=1', 'b=2'],
        'x-request-id': 'h2c-body',
      });
      let status = 0;
      let text = '';
      req.on('response', (h) => (status = Number(h[':status'])));
      req.setEncoding('utf8');
      req.on('data', (c: string) => (text += c));
      const done = new Promise((resolve) => req.on('end', resolve));
      req.write(Buffer.alloc(20_000, 1));
      setTimeout(() => req.end(Buffer.alloc(5_000, 2)), 50);
      await done;
      expect(status).toBe(200);
      expect(JSON.parse(text)).toMatchObject({ bodyBytes: 25_000 });
      const seen = upstream.seen.find((s) => s.headers['x-request-id'] === 'h2c-body')!;
      expect(seen.headers.cookie).toBe('a=1; b=2');
    } finally {
      session.close();
    }
  });

  it('enforces the sign-up bar over h2c as over HTTP/1.1', async () => {
    // A fresh gateway: the TLS tests' sign-ups were counted for the same loopback client.
    const gw = await startTestGateway(SEED_TABLE, { upstream: upstream.url });
    const session = await connected(http2.connect(gw.url));
    try {
      const statuses: number[] = [];
      let last: Answer | undefined;
      for (let i = 0; i < 6; i++) {
        last = await h2Request(
          session,
          { ':method': 'POST', ':path': '/api/v1/accounts', 'content-type': 'application/json' },
          '{}',
        );
        statuses.push(last.status);
      }
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
      const h1 = await fetch(`${gw.url}/api/v1/accounts`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      const h1Headers: Record<string, string> = {};
      h1.headers.forEach((v, k) => (h1Headers[k] = v));
      expect(h1.status).toBe(429);
      expect(await h1.text()).toBe(last!.body);
      expect(limitHeaders(last!.headers)).toEqual(limitHeaders(h1Headers));
    } finally {
      session.close();
      await gw.shutdown(200);
    }
  });

  it('leaves HTTP/1.1 requests that start like the preface to HTTP/1.1 (POST, PUT, PATCH, a lone P)', async () => {
    for (const method of ['POST', 'PUT', 'PATCH']) {
      const res = await fetch(`${plainGw.url}/api/v1/statuses/7`, { method, body: 'x' });
      expect(res.status).toBe(200);
    }
    // `PRI * HTTP/2.0` without the rest of the preface is no HTTP/2 connection: HTTP/1.1 refuses it.
    const answer = await rawExchange(plainGw.url, 'PRI * HTTP/2.0\r\nHost: x\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
  });

  it.skipIf(noCurl)('is spoken by curl --http2-prior-knowledge', async () => {
    const { stdout } = await run('curl', [
      '-sS',
      '--http2-prior-knowledge',
      '-o',
      '/dev/null',
      '-w',
      '%{http_version} %{http_code}',
      `${plainGw.url}/api/v1/statuses/8`,
    ]);
    expect(stdout).toBe('2 200');
  });

  it.skipIf(noH2load)('counts h2load’s streams exactly, sixteen at once on each of four connections', async () => {
    const gw = await startTestGateway(
      'limits:\n  - { name: timeline, match: GET /api/v1/timelines/*, per: ip, limit: 100, period: 1h }\n',
      {
        upstream: upstream.url,
      },
    );
    try {
      const { stdout } = await run('h2load', ['-n', '400', '-c', '4', '-m', '16', `${gw.url}/api/v1/timelines/home`]);
      expect(stdout).toContain('Application protocol: h2c');
      // Every stream answered; the bucket's 100 admitted, not one more, however the streams interleave.
      expect(stdout).toMatch(
        /requests: 400 total, 400 started, 400 done, 100 succeeded, 300 failed, 0 errored, 0 timeout/,
      );
      expect(stdout).toMatch(/status codes: 100 2xx, 0 3xx, 300 4xx, 0 5xx/);
    } finally {
      await gw.shutdown(200);
    }
  });
});

/** Bytes written on a fresh plain connection, and what comes back until the gateway closes it. */
function rawExchange(url: string, bytes: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(bytes));
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (c: string) => (text += c));
    socket.on('close', () => resolve(text));
    socket.on('error', reject);
  });
}

describe('HTTP/2 and the drain', () => {
  it('tells an HTTP/2 connection GOAWAY at shutdown: its open stream finishes, one still running at the grace’s end is logged DRAIN_TIMEOUT', async () => {
    const captured = capturingLogger();
    const gw = await startTestGateway('limits: []\n', { upstream: upstream.url, logger: captured.logger });
    const release: Array<() => void> = [];
    upstream.route('/api/v1/drain-held', (_req, res) => release.push(() => res.writeHead(200).end('done')));
    const session = await connected(http2.connect(gw.url));
    const goaway = new Promise<void>((resolve) => session.once('goaway', () => resolve()));
    session.on('error', () => undefined);
    const finished = h2Request(session, { ':path': '/api/v1/drain-held', 'x-request-id': 'h2-drain-ok' });
    const cut = h2Request(session, { ':path': '/api/v1/drain-held', 'x-request-id': 'h2-drain-cut' }).catch(
      (err: Error) => err,
    );
    await eventually(() => release.length, { what: 'both requests at the upstream', until: (n) => n === 2 });
    const down = gw.shutdown(1_500);
    await goaway;
    release.shift()!();
    expect(await finished).toMatchObject({ status: 200, body: 'done' });
    await down;
    // Cut: reset or ended without an answer.
    const c = await cut;
    expect(c instanceof Error || Number.isNaN(c.status)).toBe(true);
    const line = await eventually(() => captured.lines.find((l) => l.msg === 'request' && l.id === 'h2-drain-cut'), {
      what: 'the cut request’s access line',
      until: (l) => l !== undefined,
    });
    expect(line).toMatchObject({ protocol: 'h2c', error: 'DRAIN_TIMEOUT' });
    for (const r of release.splice(0)) r();
  });
});

describe('server.http2: false', () => {
  it('serves HTTP/1.1 alone: ALPN offers http/1.1 only and the preface is answered 400', async () => {
    const gw = await startTestGateway(
      `limits: []\nserver:\n  http2: false\n  tls: { certFile: ${ca.certFile}, keyFile: ${ca.keyFile} }\n`,
      {
        upstream: upstream.url,
      },
    );
    const plain = await startTestGateway('limits: []\nserver:\n  http2: false\n', { upstream: upstream.url });
    try {
      const session = http2.connect(gw.url, { ca: ca.ca, servername: 'gw.test' });
      const refused = await new Promise<unknown>((resolve) => {
        session.once('connect', () => resolve(null));
        session.once('error', resolve);
      });
      session.destroy();
      expect(refused).toBeInstanceOf(Error);
      expect(await rawExchange(plain.url, 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n')).toMatch(/^HTTP\/1\.1 400 /);
    } finally {
      await gw.shutdown(100);
      await plain.shutdown(100);
    }
  });
});

describe('h2c behind a PROXY protocol balancer', () => {
  it('reads the PROXY header first, then tells HTTP/2 from HTTP/1.1: the client is the header’s source', async () => {
    const gw = await startTestGateway('limits: []\nserver:\n  proxyProtocol: { from: [127.0.0.1] }\n', {
      upstream: upstream.url,
    });
    const { port } = new URL(gw.url);
    const session = http2.connect(gw.url, {
      createConnection: () => {
        const socket = net.connect(Number(port), '127.0.0.1');
        socket.write('PROXY TCP4 203.0.113.9 127.0.0.1 41000 80\r\n');
        return socket;
      },
    });
    try {
      await connected(session);
      const a = await h2Request(session, { ':path': '/api/v1/statuses/10', 'x-request-id': 'h2c-proxied' });
      expect(a.status).toBe(200);
      expect(upstream.seen.find((s) => s.headers['x-request-id'] === 'h2c-proxied')!.headers['x-forwarded-for']).toBe(
        '203.0.113.9',
      );
    } finally {
      session.close();
      await gw.shutdown(100);
    }
  });
});

/**
 * Issue 27, item 2: the upstream pool is fair. A request waits a bounded time for a connection (503 +
 * Retry-After after `server.upstreamQueueTimeout`), bodies still arriving hold at most half the
 * connections, one client IP holds at most `server.maxUpstreamConnectionsPerIp`, and a body slower than
 * `server.minBodyRate` over `server.minBodyRateGrace` is answered 408. Real sockets, the real gateway.
 */
import http from 'node:http';
import net from 'node:net';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { send } from '../support/http.js';
import { gatewayFixture, SEED_TABLE, startTestGateway } from '../support/gateway.js';
import { waitFor } from '../support/process.js';
import { startRecordingUpstream, VERIFY } from '../support/recording-upstream.js';

const fx = gatewayFixture({ graceMs: 200 });

/** Answers the upstream holds until `release()`. */
const held: http.ServerResponse[] = [];
function release(n = held.length): void {
  for (const res of held.splice(0, n)) res.end('{}');
}

beforeAll(() => {
  fx.upstream.route('/api/v1/hold', (req, res) => {
    req.resume();
    res.writeHead(200, { 'Content-Type': 'application/json' });
    held.push(res);
  });
  fx.upstream.route('/api/v1/reset', (req) => req.socket.destroy());
});
// A test that fails midway leaves answers held: the next one starts with none.
afterEach(() => release());

/** A raw connection that has sent `text`; its answer is read with `statusOf`. */
function open(text: string): Promise<net.Socket> {
  const u = new URL(fx.gw!.url);
  return new Promise((resolve) => {
    const s = net.connect(Number(u.port), u.hostname, () => s.write(text, () => resolve(s)));
    s.on('error', () => resolve(s));
  });
}

/** What `s` receives until it closes or `ms` passes: its status line and whether it closed. */
function answerOf(s: net.Socket, ms = 5000): Promise<{ status: string; text: string; closed: boolean }> {
  return new Promise((resolve) => {
    let text = '';
    const done = (closed: boolean): void => {
      clearTimeout(timer);
      resolve({ status: text.split('\r\n')[0]!, text, closed });
    };
    const timer = setTimeout(() => done(false), ms);
    s.on('data', (d: Buffer) => {
      text += d.toString('latin1');
    });
    s.on('close', () => done(true));
  });
}

/** One request on its own connection, closed after the answer. */
const get = (path: string, ip: string): string =>
  `GET ${path} HTTP/1.1\r\nHost: gw\r\nX-Forwarded-For: ${ip}\r\nConnection: close\r\n\r\n`;
/** An upload whose body is still arriving: its head and the first byte of a body of `length`. */
const upload = (ip: string, length = 1000, path = '/api/v1/hold'): string =>
  `POST ${path} HTTP/1.1\r\nHost: gw\r\nX-Forwarded-For: ${ip}\r\nContent-Type: application/octet-stream\r\nContent-Length: ${length}\r\nConnection: close\r\n\r\nx`;

function holdsSeen(): number {
  return fx.upstream.seen.filter((s) => s.url === '/api/v1/hold').length;
}

/** `n` held GETs, each from its own address: `n` connections of the pool taken. */
async function hold(n: number, net10: number): Promise<net.Socket[]> {
  const before = holdsSeen();
  const sockets = await Promise.all(
    Array.from({ length: n }, (_, i) => open(get('/api/v1/hold', `10.${net10}.${i >> 8}.${i & 255}`))),
  );
  await waitFor(() => holdsSeen() - before === n, 10_000, `the upstream holding ${n} more answers`);
  return sockets;
}

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${fx.gw!.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? NaN : Number(line.split(' ')[1]);
}

/** `ip` can have exactly `cap` exchanges at once: the next one is refused 429 (a count leaked or given back twice shows here). */
async function expectShare(ip: string, cap: number): Promise<void> {
  release();
  const holds = await Promise.all(Array.from({ length: cap }, () => open(get('/api/v1/hold', ip))));
  await waitFor(() => held.length >= cap, 5000, `${cap} held answers for ${ip}`);
  const over = await answerOf(await open(get('/api/v1/statuses/1', ip)));
  expect(over.status, `exchange ${cap + 1} of ${ip}`).toMatch(/^HTTP\/1\.1 429 /);
  release();
  await Promise.all(holds.map((s) => answerOf(s, 2000)));
  for (const s of holds) s.destroy();
}

describe('the per-client cap of upstream connections', () => {
  it('answers a client’s exchange beyond the cap 429 with Retry-After: 1, while other clients are served', async () => {
    fx.gw = await startTestGateway(`limits: []\nserver: { maxUpstreamConnectionsPerIp: 2 }\n`, {
      upstream: fx.upstream.url,
    });
    const holds = await Promise.all([open(get('/api/v1/hold', '10.1.0.1')), open(get('/api/v1/hold', '10.1.0.1'))]);
    await waitFor(() => held.length === 2, 5000, 'two held answers');
    const over = await send(fx.gw.url, { path: '/api/v1/statuses/1', headers: { 'X-Forwarded-For': '10.1.0.1' } });
    expect(over.status).toBe(429);
    expect(over.headers['retry-after']).toBe('1');
    expect(over.json()).toEqual({ error: 'Too many requests', code: 'TOO_MANY_IN_FLIGHT' });
    expect(
      (await send(fx.gw.url, { path: '/api/v1/statuses/1', headers: { 'X-Forwarded-For': '10.1.0.2' } })).status,
    ).toBe(200);
    expect(await metric('rategate_upstream_refused_total{reason="per_ip_cap"}')).toBe(1);
    release();
    for (const s of holds) s.destroy();
    await expectShare('10.1.0.1', 2);
  });

  it('counts an IPv6 client by its network, and no cap at all with 0', async () => {
    fx.gw = await startTestGateway(`limits: []\nserver: { maxUpstreamConnectionsPerIp: 1 }\n`, {
      upstream: fx.upstream.url,
    });
    const first = await open(get('/api/v1/hold', '2001:db8:1:1::1'));
    await waitFor(() => held.length === 1, 5000, 'one held answer');
    const sibling = await answerOf(await open(get('/api/v1/statuses/1', '2001:db8:1:1::2')));
    expect(sibling.status).toMatch(/^HTTP\/1\.1 429 /);
    release();
    first.destroy();
    await fx.gw.shutdown(200);
    fx.gw = await startTestGateway(`limits: []\nserver: { maxUpstreamConnectionsPerIp: 0 }\n`, {
      upstream: fx.upstream.url,
    });
    const many = await Promise.all(Array.from({ length: 40 }, () => open(get('/api/v1/hold', '10.2.0.1'))));
    await waitFor(() => held.length === 40, 5000, '40 held answers from one client');
    release();
    for (const s of many) s.destroy();
  });

  it('gives each count back exactly once, however the exchange ends', async () => {
    fx.gw = await startTestGateway(
      `limits: []\nserver: { maxUpstreamConnectionsPerIp: 2, upstreamQueueTimeout: 300ms, minBodyRate: 1kB, minBodyRateGrace: 1s, bodyLimits: [{ match: POST /api/v1/capped, maxBodySize: 1kB }] }\n`,
      { upstream: fx.upstream.url },
    );
    const ip = '10.3.0.1';
    // Answered; the upstream resets (502); the client leaves mid-exchange.
    expect((await send(fx.gw.url, { path: '/api/v1/statuses/1', headers: { 'X-Forwarded-For': ip } })).status).toBe(
      200,
    );
    expect((await send(fx.gw.url, { path: '/api/v1/reset', headers: { 'X-Forwarded-For': ip } })).status).toBe(502);
    const left = await open(get('/api/v1/hold', ip));
    await waitFor(() => held.length === 1, 5000, 'one held answer');
    left.destroy();
    await waitFor(() => held[0]!.destroyed, 5000, 'the upstream request aborted');
    held.length = 0;
    // A body too slow (408).
    const slow = await answerOf(await open(upload(ip, 100_000)), 5000);
    expect(slow.status).toMatch(/^HTTP\/1\.1 408 /);
    await expectShare(ip, 2);
    // While waiting for a connection: the client leaves, the body passes its limit (413), the wait ends (503).
    const pool = await hold(128, 4);
    const gone = await open(upload(ip));
    await waitFor(
      async () => (await metric('rategate_upstream_waiting')) === 1,
      5000,
      'the upload in line for a connection',
    );
    gone.destroy();
    const capped = await answerOf(
      await open(
        `POST /api/v1/capped HTTP/1.1\r\nHost: gw\r\nX-Forwarded-For: ${ip}\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n${'y'.repeat(0x800)}\r\n`,
      ),
    );
    expect(capped.status).toMatch(/^HTTP\/1\.1 413 /);
    const busy = await answerOf(await open(get('/api/v1/statuses/1', ip)));
    expect(busy.status).toMatch(/^HTTP\/1\.1 503 /);
    release();
    for (const s of pool) s.destroy();
    await expectShare(ip, 2);
  });
});

describe('the wait for an upstream connection', () => {
  it('answers 503 with Retry-After: 1 when no connection comes free within upstreamQueueTimeout, and counts it', async () => {
    fx.gw = await startTestGateway(`limits: []\nserver: { upstreamQueueTimeout: 300ms }\n`, {
      upstream: fx.upstream.url,
    });
    const pool = await hold(128, 5);
    const started = Date.now();
    const busy = await send(fx.gw.url, { path: '/api/v1/statuses/1', headers: { 'X-Forwarded-For': '10.6.0.1' } });
    expect(busy.status).toBe(503);
    expect(busy.headers['retry-after']).toBe('1');
    expect(busy.json()).toEqual({ error: 'Upstream busy', code: 'UPSTREAM_BUSY' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(await metric('rategate_upstream_refused_total{reason="queue_timeout"}')).toBe(1);
    expect(await metric('rategate_upstream_waiting')).toBe(0);
    release();
    for (const s of pool) s.destroy();
    expect((await send(fx.gw.url, { path: '/api/v1/statuses/1' })).status).toBe(200);
  });

  it('gives the first connection that comes free to the request waiting longest', async () => {
    fx.gw = await startTestGateway(`limits: []\nserver: { upstreamQueueTimeout: 10s }\n`, {
      upstream: fx.upstream.url,
    });
    const pool = await hold(128, 7);
    // The first in line is held in turn once it has a connection: the one behind it must still wait.
    const first = await open(get('/api/v1/hold', '10.8.0.1'));
    await waitFor(async () => (await metric('rategate_upstream_waiting')) === 1, 5000, 'one request waiting');
    const second = open(get('/api/v1/statuses/2', '10.8.0.2')).then((s) => answerOf(s, 5000));
    await waitFor(async () => (await metric('rategate_upstream_waiting')) === 2, 5000, 'two requests waiting');
    release(1);
    const firstSeen = (): boolean =>
      fx.upstream.seen.some((s) => String(s.headers['x-forwarded-for']).startsWith('10.8.0.1,'));
    await waitFor(() => held.length === 128 && firstSeen(), 5000, 'the first in line at the upstream');
    expect(await metric('rategate_upstream_waiting')).toBe(1);
    release(1);
    expect((await second).status).toMatch(/^HTTP\/1\.1 200 /);
    release();
    first.destroy();
    for (const s of pool) s.destroy();
  });

  it('keeps half the connections for requests whose body has arrived: uploads still arriving wait, others go through', async () => {
    fx.gw = await startTestGateway(`limits: []\nserver: { upstreamQueueTimeout: 500ms, minBodyRate: 0 }\n`, {
      upstream: fx.upstream.url,
    });
    const uploads = await Promise.all(Array.from({ length: 64 }, (_, i) => open(upload(`10.9.0.${i}`))));
    await waitFor(() => held.length === 64, 5000, '64 uploads at the upstream');
    const more = await answerOf(await open(upload('10.9.1.1')), 3000);
    expect(more.status).toMatch(/^HTTP\/1\.1 503 /);
    expect(more.closed).toBe(true);
    const started = Date.now();
    expect(
      (await send(fx.gw.url, { path: '/api/v1/statuses/1', headers: { 'X-Forwarded-For': '10.9.2.1' } })).status,
    ).toBe(200);
    // A small body sent a moment after its head (as most clients send them) is an upload only until it is in.
    const split = await open(
      'POST /api/v1/statuses HTTP/1.1\r\nHost: gw\r\nX-Forwarded-For: 10.9.2.2\r\nContent-Type: application/json\r\nContent-Length: 15\r\nConnection: close\r\n\r\n',
    );
    setTimeout(() => split.write('{"status":"hi"}'), 50);
    expect((await answerOf(split, 2000)).status).toMatch(/^HTTP\/1\.1 200 /);
    expect(Date.now() - started).toBeLessThan(500);
    release();
    for (const s of uploads) s.destroy();
  });
});

describe('the minimum body rate', () => {
  const TABLE = `${SEED_TABLE}server: { minBodyRate: 1kB, minBodyRateGrace: 1s }\n`;

  /** Sends `bytes` bytes every `everyMs` on `s` until it closes. */
  function trickle(s: net.Socket, bytes: number, everyMs: number): NodeJS.Timeout {
    const timer = setInterval(() => {
      if (s.destroyed || !s.writable) clearInterval(timer);
      else s.write('z'.repeat(bytes));
    }, everyMs);
    return timer;
  }

  it('answers 408 and closes a forwarded body slower than minBodyRate over minBodyRateGrace, and aborts it upstream', async () => {
    fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url });
    const s = await open(upload('10.10.0.1', 100_000, '/api/v1/media'));
    const timer = trickle(s, 20, 200); // 100 B/s
    const started = Date.now();
    const a = await answerOf(s, 6000);
    clearInterval(timer);
    expect(a.status).toMatch(/^HTTP\/1\.1 408 /);
    expect(a.text).toContain('{"error":"Request timeout: the body arrives too slowly","code":"BODY_TOO_SLOW"}');
    expect(a.closed).toBe(true);
    expect(Date.now() - started).toBeLessThan(4000);
    expect(fx.upstream.forwarded().some((r) => r.url === '/api/v1/media')).toBe(true);
    expect(await metric('rategate_slow_bodies_total')).toBe(1);
  });

  it('answers 408 to a body read for the decision that arrives too slowly, and forwards nothing', async () => {
    fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url });
    // A form body without a token in the header: read for one before anything is decided.
    const s = await open(
      'POST /api/v1/statuses HTTP/1.1\r\nHost: gw\r\nX-Forwarded-For: 10.11.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 5000\r\n\r\nstatus=',
    );
    const timer = trickle(s, 1, 500);
    const a = await answerOf(s, 6000);
    clearInterval(timer);
    expect(a.status).toMatch(/^HTTP\/1\.1 408 /);
    expect(a.closed).toBe(true);
    expect(fx.upstream.forwarded()).toHaveLength(0);
    expect((await send(fx.gw.url, { path: '/api/v1/statuses/1' })).status).toBe(200);
  });

  it('does not cut a fast body that the upstream is slow to read', async () => {
    fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url });
    fx.upstream.route('/api/v1/slow-reader', (req, res) => {
      // Reads nothing for 3 s (three grace periods): the client's bytes wait in the buffers meanwhile.
      setTimeout(() => {
        let n = 0;
        req.on('data', (c: Buffer) => (n += c.length));
        req.on('end', () => res.end(JSON.stringify({ n })));
      }, 3000);
    });
    // More than every socket buffer on the way holds (loopback buffers grow to megabytes): the client is held back.
    const body = Buffer.alloc(64 * 1024 * 1024, 120);
    const a = await send(fx.gw.url, {
      method: 'POST',
      path: '/api/v1/slow-reader',
      body,
      headers: { 'Content-Type': 'application/octet-stream' },
    });
    expect(a.status).toBe(200);
    expect(a.json()).toEqual({ n: body.length });
  });

  it('does not count the time a client waits for its 100 Continue while the decision takes longer than the grace period', async () => {
    const slowAccounts = await startRecordingUpstream();
    slowAccounts.route(VERIFY, (_req, res) => {
      // Introspection slower than two grace periods: the client sends nothing until told to.
      setTimeout(() => res.end(JSON.stringify({ id: '1' })), 2500);
    });
    try {
      fx.gw = await startTestGateway(TABLE, { upstream: slowAccounts.url });
      const s = await open(
        'POST /api/v1/statuses HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer user-1\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: 15\r\nConnection: close\r\n\r\n',
      );
      let text = '';
      s.on('data', (d: Buffer) => {
        text += d.toString('latin1');
        if (text.startsWith('HTTP/1.1 100 ') && !text.includes('status')) {
          text += '[status]'; // sent once
          s.write('{"status":"hi"}');
        }
      });
      const a = await answerOf(s, 8000);
      expect(a.text).toMatch(/^HTTP\/1\.1 100 /);
      expect(a.text).toMatch(/HTTP\/1\.1 200 /);
    } finally {
      await fx.gw?.shutdown(200);
      fx.gw = undefined;
      await slowAccounts.close();
    }
  });

  it('lets a body at a steady pace above the minimum through', async () => {
    fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url });
    const s = await open(
      `POST /api/v1/media HTTP/1.1\r\nHost: gw\r\nX-Forwarded-For: 10.12.0.1\r\nContent-Type: application/octet-stream\r\nContent-Length: ${1 + 30 * 400}\r\nConnection: close\r\n\r\nx`,
    );
    // 2 kB/s for 3 s: twice the minimum, over three grace periods.
    let sent = 0;
    const timer = setInterval(() => {
      if (sent === 30) return clearInterval(timer);
      sent++;
      s.write('z'.repeat(400));
    }, 100);
    const a = await answerOf(s, 8000);
    clearInterval(timer);
    expect(a.status).toMatch(/^HTTP\/1\.1 200 /);
  });
});

/**
 * The PROXY protocol on the real gateway: Debian's HAProxy in front (send-proxy and send-proxy-v2) hands
 * the gateway its clients' own addresses, so per-IP limits count the client and not the balancer; a raw
 * socket from the balancer's address without a header, or slow to send one, is closed; a forged header
 * from any other peer is answered 400 and closed. The process answers after each.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { capturingLogger, startTestGateway, type LogLine, type TestGateway } from '../support/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { eventually } from '../support/eventually.js';
import { freePort } from '../support/servers.js';

const haproxyMissing = spawnSync('haproxy', ['-v']).status !== 0;
if (haproxyMissing && process.env.CI === 'true')
  throw new Error('haproxy is required under CI (Debian package haproxy)');

// Only the balancer's own address (HAProxy connects from 127.0.0.1) must send a header; the test's
// clients bind other loopback addresses (127.0.0.7, …), which Linux routes like 127.0.0.1.
const TABLE = `
limits:
  - name: per-ip
    match: GET /api/v1/statuses/*
    per: ip
    limit: 2
    period: 1h
log: { client: clear }
server:
  headersTimeout: 1s
  proxyProtocol: { from: [127.0.0.1/32] }
`;

let upstream: RecordingUpstream;
let gw: TestGateway;
let lines: LogLine[];
let gatewayPort: number;
beforeAll(async () => {
  upstream = await startRecordingUpstream();
  const captured = capturingLogger();
  lines = captured.lines;
  gw = await startTestGateway(TABLE, { upstream: upstream.url, logger: captured.logger });
  gatewayPort = Number(new URL(gw.url).port);
});
afterAll(async () => {
  await gw?.shutdown(200);
  await upstream?.close();
});

/** One GET from `localAddress` to `port`; its status, or 'closed' when the connection ended without an answer. */
function get(port: number, urlPath: string, localAddress: string): Promise<number | 'closed'> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: urlPath, localAddress, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve('closed'));
  });
}

/** Writes `bytes` on a raw connection from `localAddress`; resolves with all the gateway sent once it closed. */
function raw(bytes: Buffer | string, localAddress: string, holdMs = 0): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port: gatewayPort, localAddress });
    let got = '';
    socket.on('data', (d) => (got += d.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(got));
    socket.on('connect', () => {
      socket.write(bytes);
      if (holdMs > 0) setTimeout(() => socket.end(), holdMs);
    });
  });
}

async function alive(): Promise<void> {
  expect(await get(gatewayPort, '/api/v1/accounts/1', '127.0.0.50')).toBe(200);
}

async function metric(name: string): Promise<string> {
  return gw.metrics.registry.getSingleMetricAsString(name);
}

describe.skipIf(haproxyMissing)('behind HAProxy', () => {
  let haproxy: ChildProcess | undefined;
  afterAll(() => haproxy?.kill('SIGKILL'));

  /** HAProxy in TCP mode on a free port, sending `proxyOption` to the gateway; resolves once it accepts. */
  async function startHaproxy(proxyOption: 'send-proxy' | 'send-proxy-v2'): Promise<number> {
    haproxy?.kill('SIGKILL');
    const port = await freePort();
    const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-haproxy-'));
    const cfg = path.join(dir, 'haproxy.cfg');
    writeFileSync(
      cfg,
      [
        'global',
        '  maxconn 256',
        'defaults',
        '  mode tcp',
        '  timeout connect 2s',
        '  timeout client 10s',
        '  timeout server 10s',
        'frontend clients',
        `  bind 127.0.0.1:${port}`,
        '  default_backend gateway',
        'backend gateway',
        `  server rategate 127.0.0.1:${gatewayPort} ${proxyOption}`,
        '',
      ].join('\n'),
    );
    const child = spawn('haproxy', ['-db', '-f', cfg], { stdio: ['ignore', 'pipe', 'pipe'] });
    haproxy = child;
    await eventually(
      () =>
        new Promise<boolean>((resolve) => {
          const s = net.connect(port, '127.0.0.1', () => (s.destroy(), resolve(true)));
          s.on('error', () => resolve(false));
        }),
      { what: 'HAProxy accepting' },
    );
    return port;
  }

  it.each([
    ['send-proxy-v2', '127.0.0.7', '127.0.0.8'],
    ['send-proxy', '127.0.0.17', '127.0.0.18'],
  ] as const)('with %s, counts each client by its own address, not HAProxy’s', async (option, first, second) => {
    const port = await startHaproxy(option);
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push(await get(port, `/api/v1/statuses/${i}`, first));
    expect(statuses).toEqual([200, 200, 429]);
    // A second client through the same balancer has its own bucket.
    expect(await get(port, '/api/v1/statuses/9', second)).toBe(200);
    const clients = lines
      .filter((l) => typeof l.path === 'string' && String(l.path).startsWith('/api/v1/statuses/'))
      .map((l) => l.client);
    expect(clients.slice(-4)).toEqual([first, first, first, second]);
    // The upstream is told the client's address too.
    expect(upstream.seen.at(-1)?.headers['x-forwarded-for']).toBe(second);
    await alive();
  });
});

describe('from the balancer’s address', () => {
  it('reads the header, then every request of the connection, pipelined and with a body', async () => {
    const header = 'PROXY TCP4 198.51.100.9 127.0.0.1 40000 8080\r\n';
    const body = 'a'.repeat(20_000);
    const answer = await raw(
      `${header}GET /api/v1/statuses/1 HTTP/1.1\r\nHost: gw\r\n\r\nPOST /api/v1/statuses HTTP/1.1\r\nHost: gw\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      '127.0.0.1',
    );
    expect(answer.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 200']);
    expect(upstream.seen.filter((r) => r.headers['x-forwarded-for'] === '198.51.100.9').map((r) => r.method)).toEqual([
      'GET',
      'POST',
    ]);
    expect(
      upstream.seen.find((r) => r.method === 'POST' && r.headers['x-forwarded-for'] === '198.51.100.9')?.headers[
        'content-length'
      ],
    ).toBe('20000');
    await alive();
  });

  it('closes a connection that opens without a header, or with a malformed one, and counts it', async () => {
    const before = await metric('rategate_proxy_protocol_refused_total');
    expect(await raw('GET /api/v1/statuses/1 HTTP/1.1\r\nHost: gw\r\n\r\n', '127.0.0.1')).toBe('');
    expect(await raw('PROXY TCP4 999.1.1.1 127.0.0.1 1 2\r\nGET / HTTP/1.1\r\n\r\n', '127.0.0.1')).toBe('');
    expect(await metric('rategate_proxy_protocol_refused_total')).not.toBe(before);
    expect(await metric('rategate_proxy_protocol_refused_total')).toMatch(/reason="invalid"} 2/);
    // And logged (issue 40): each refusal a warn line with its reason.
    const logged = lines.filter((l) => l.refused === 'proxy_protocol_invalid');
    expect(logged).toHaveLength(2);
    expect(logged[0]).toMatchObject({ level: 'warn', msg: 'connection closed: no valid PROXY header' });
    await alive();
  });

  it('closes a connection whose header does not arrive within server.headersTimeout', async () => {
    const started = Date.now();
    expect(await raw('PROXY TCP4 198.51', '127.0.0.1', 5_000)).toBe('');
    expect(Date.now() - started).toBeLessThan(4_000);
    expect(await metric('rategate_proxy_protocol_refused_total')).toMatch(/reason="timeout"} 1/);
    await alive();
  });
});

describe('from any other peer', () => {
  it('answers a forged header 400 and closes, so no client can name its own address', async () => {
    const seen = upstream.seen.length;
    for (const forged of [
      'PROXY TCP4 6.6.6.6 127.0.0.1 40000 8080\r\nGET /api/v1/statuses/1 HTTP/1.1\r\nHost: gw\r\n\r\n',
      Buffer.concat([
        Buffer.from([
          0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a, 0x21, 0x11, 0x00, 0x0c, 6, 6, 6, 6,
          127, 0, 0, 1, 0x9c, 0x40, 0x1f, 0x90,
        ]),
        Buffer.from('GET /api/v1/statuses/1 HTTP/1.1\r\nHost: gw\r\n\r\n'),
      ]),
    ]) {
      expect(await raw(forged, '127.0.0.9')).toMatch(/^HTTP\/1\.1 400 /);
    }
    expect(upstream.seen.length).toBe(seen);
    expect(lines.some((l) => l.client === '6.6.6.6')).toBe(false);
    await alive();
  });
});

/** WebSocket upgrades through the gateway: tunnelled, counted once at the upgrade, limited with a 429. */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import type http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { capturingLogger, startTestGateway, type TestGateway } from '../support/gateway.js';
import { eventually } from '../support/eventually.js';

let wss: WebSocketServer;
let upstreamUrl: string;
let serverSockets: WebSocket[] = [];
/** The head of each upgrade the upstream accepted. */
let upgradeHeaders: http.IncomingHttpHeaders[] = [];

/** The upstream side of the n-th tunnel of the test, once the upstream has accepted it (the client's open can come first). */
async function upstreamSocket(n: number): Promise<WebSocket> {
  while (serverSockets.length < n) await new Promise((r) => setImmediate(r));
  return serverSockets[n - 1]!;
}
let gw: TestGateway;

beforeAll(async () => {
  wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((r) => wss.once('listening', r));
  upstreamUrl = `http://127.0.0.1:${(wss.address() as AddressInfo).port}`;
  wss.on('connection', (ws, req) => {
    serverSockets.push(ws);
    upgradeHeaders.push(req.headers);
    ws.on('message', (m) => ws.send(`echo ${req.url} ${m.toString()}`));
  });
});
afterAll(async () => new Promise<void>((r) => wss.close(() => r())));
afterEach(async () => {
  serverSockets = [];
  upgradeHeaders = [];
  await gw.shutdown(200);
});

function connect(path: string): Promise<{ ws: WebSocket; status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(gw.url.replace('http', 'ws') + path);
    ws.once('open', () => resolve({ ws, status: 101, body: '' }));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ ws, status: res.statusCode ?? 0, body }));
    });
    ws.once('error', reject);
  });
}

function nextMessage(ws: WebSocket): Promise<string> {
  return new Promise((resolve) => ws.once('message', (m) => resolve(m.toString())));
}

const TABLE = `limits:\n  - { name: streaming, match: GET /api/v1/streaming, per: ip, limit: 2, period: 1h }\n`;

describe('WebSocket upgrades', () => {
  it('tunnels messages both ways on the normalized path', async () => {
    gw = await startTestGateway(TABLE, { upstream: upstreamUrl });
    const { ws, status } = await connect('//api/v1/streaming/?stream=user');
    expect(status).toBe(101);
    const reply = nextMessage(ws);
    ws.send('hello');
    expect(await reply).toBe('echo /api/v1/streaming?stream=user hello');
    // Many messages on one upgrade count once: the bucket still has one upgrade left.
    for (let i = 0; i < 20; i++) {
      const r = nextMessage(ws);
      ws.send(String(i));
      await r;
    }
    const second = await connect('/api/v1/streaming');
    expect(second.status).toBe(101);
    second.ws.close();
    ws.close();
  });

  it('drops client-IP and scheme claims of an untrusted peer in any spelling Puma reads (`_` = `-`), and rebuilds X-Forwarded-*', async () => {
    gw = await startTestGateway(`${TABLE}clients: { trustedProxies: [10.0.0.0/8] }\n`, { upstream: upstreamUrl });
    const claims = [
      'X_Real_IP',
      'Client_IP',
      'True-Client-IP',
      'X_Forwarded_For',
      'X_Forwarded_Proto',
      'X_Forwarded_Scheme',
      'X-Forwarded-Ssl',
      'X_Forwarded_Port',
      'Front_End_Https',
      'Forwarded',
    ];
    const ws = new WebSocket(gw.url.replace('http', 'ws') + '/api/v1/streaming', {
      headers: Object.fromEntries(claims.map((n) => [n, '6.6.6.6'])),
    });
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    const seen = upgradeHeaders[0]!;
    for (const [k, v] of Object.entries(seen)) expect(v, k).not.toContain('6.6.6.6');
    expect(seen['x-forwarded-for']).toBe('127.0.0.1');
    expect(seen['x-forwarded-proto']).toBe('http');
    expect(seen['x-forwarded-ssl']).toBe('off');
    expect(seen['x-forwarded-port']).toBe(new URL(gw.url).port);
    ws.close();
  });

  it('answers a limited upgrade with 429 and the rate-limit headers', async () => {
    gw = await startTestGateway(TABLE, { upstream: upstreamUrl });
    (await connect('/api/v1/streaming')).ws.close();
    (await connect('/api/v1/streaming')).ws.close();
    const third = await connect('/api/v1/streaming');
    expect(third.status).toBe(429);
    expect(third.body).toBe('{"error":"Too many requests"}');
  });

  it('closes the upstream socket when the client closes, and the client socket when the upstream closes', async () => {
    gw = await startTestGateway(TABLE, { upstream: upstreamUrl });
    const a = await connect('/api/v1/streaming');
    const upstreamSide = await upstreamSocket(1);
    const upstreamClosed = new Promise((r) => upstreamSide.once('close', r));
    a.ws.terminate();
    await upstreamClosed;

    const b = await connect('/api/v1/streaming');
    const upstreamOfB = await upstreamSocket(2);
    const clientClosed = new Promise((r) => b.ws.once('close', r));
    upstreamOfB.terminate();
    await clientClosed;
  });
});

describe('WebSocket upgrades run the same pipeline as plain requests', () => {
  it('puts the gateway rate-limit headers on the 101, merged with those the upstream sent (the tighter triple, both policies)', async () => {
    const addUpstreamHeaders = (headers: string[]) =>
      headers.push('X-RateLimit-Limit: 999', 'X-RateLimit-Remaining: 998', 'RateLimit: "up";r=1;t=1');
    wss.on('headers', addUpstreamHeaders);
    try {
      gw = await startTestGateway(TABLE, { upstream: upstreamUrl });
      const head = await new Promise<http.IncomingMessage>((resolve, reject) => {
        const ws = new WebSocket(gw.url.replace('http', 'ws') + '/api/v1/streaming');
        ws.once('upgrade', (res) => resolve(res));
        ws.once('open', () => ws.close());
        ws.once('error', reject);
      });
      expect(head.statusCode).toBe(101);
      expect(head.headers['x-ratelimit-limit']).toBe('2');
      expect(head.headers['x-ratelimit-remaining']).toBe('1');
      expect(head.headers['x-ratelimit-reset']).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
      expect(head.headers['ratelimit-policy']).toBe('"streaming";q=2;w=3600');
      expect(head.headers['ratelimit']).toMatch(/^"streaming";r=1;t=\d+, "up";r=1;t=1$/);
    } finally {
      wss.off('headers', addUpstreamHeaders);
    }
  });

  it('refuses an upgrade with 503 once the gateway is draining', async () => {
    gw = await startTestGateway(TABLE, { upstream: upstreamUrl });
    const { port } = new URL(gw.url);
    const accepted = new Promise<net.Socket>((r) => gw.server.once('connection', r));
    const socket = net.connect(Number(port), '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    // The head is half sent when the drain starts, so the request is in flight, not an idle connection.
    const half = 'GET /api/v1/streaming HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n';
    socket.write(half);
    const inGateway = await accepted;
    await eventually(() => inGateway.bytesRead >= half.length, { what: 'the half head read by the gateway' });
    const stopped = gw.shutdown(2_000);
    await new Promise((r) => setImmediate(r));
    socket.write('Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n');
    const answer = await new Promise<string>((resolve) => {
      let text = '';
      socket.on('data', (c) => (text += c));
      socket.once('close', () => resolve(text));
    });
    expect(answer).toMatch(/^HTTP\/1\.1 503 /);
    expect(answer).toContain('{"error":"Shutting down","code":"SHUTTING_DOWN"}');
    await stopped;
    gw = await startTestGateway(TABLE, { upstream: upstreamUrl }); // afterEach shuts one down
  });

  it('writes one access-log line per upgrade, tunnelled or refused', async () => {
    const { logger, lines } = capturingLogger();
    gw = await startTestGateway(TABLE, { upstream: upstreamUrl, logger });
    (await connect('/api/v1/streaming')).ws.close();
    (await connect('/api/v1/streaming')).ws.close();
    expect((await connect('/api/v1/streaming')).status).toBe(429);
    const access = lines.filter((l) => l.msg === 'request');
    expect(access.map((l) => [l.method, l.path, l.status, l.decision])).toEqual([
      ['GET', '/api/v1/streaming', 101, 'allowed'],
      ['GET', '/api/v1/streaming', 101, 'allowed'],
      ['GET', '/api/v1/streaming', 429, 'limited'],
    ]);
    expect(access[2]!.rule).toBe('streaming');
    const metrics = await (await fetch(`${gw.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/rategate_gateway_responses_total\{code="429"\} 1/);
    // The RED metrics count upgrades where they end too: the 101s as 1xx, the refused one as 4xx.
    expect(metrics).toMatch(/rategate_http_responses_total\{code_class="1xx"\} 2\n/);
    expect(metrics).toMatch(/rategate_http_responses_total\{code_class="4xx"\} 1\n/);
    expect(metrics).toMatch(/rategate_http_request_duration_seconds_count\{code_class="1xx",decision="allowed"\} 2\n/);
    expect(metrics).toMatch(/rategate_http_request_duration_seconds_count\{code_class="4xx",decision="limited"\} 1\n/);
  });
});

describe('an upgrade whose client resets during the limit decision', () => {
  it('costs that one socket, not the gateway', async () => {
    const { startRecordingUpstream, VERIFY } = await import('../support/recording-upstream.js');
    const slow = await startRecordingUpstream();
    // The introspection call is slow, so the reset lands while the upgrade waits for its decision.
    let answered = false;
    slow.route(VERIFY, (_req, res) => {
      res.once('finish', () => (answered = true));
      setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{"id":"1"}'), 300);
    });
    try {
      const table = `limits:\n  - { name: streaming, match: GET /api/v1/streaming, per: account, limit: 5, period: 1h }\n`;
      gw = await startTestGateway(table, { upstream: slow.url });
      const { port } = new URL(gw.url);
      const socket = net.connect(Number(port), '127.0.0.1');
      await new Promise((r) => socket.once('connect', r));
      socket.write(
        'GET /api/v1/streaming HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer user-1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n' +
          'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
      );
      // The reset lands while the upgrade waits for its decision: the introspection call has reached the upstream.
      await eventually(() => slow.seen.some((s) => s.url.startsWith(VERIFY)), {
        what: 'the introspection call at the upstream',
      });
      socket.resetAndDestroy();
      // The decision comes back after the reset: the moment an unhandled error on that socket would surface.
      await eventually(() => answered, { what: 'the introspection answered after the reset' });
      expect((await fetch(`${gw.url}/healthz-is-not-limited`)).status).toBeGreaterThan(0);
    } finally {
      await slow.close();
    }
  });
});

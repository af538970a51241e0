/**
 * Several upstreams (SPEC §3.2): `upstreams:` by name and `routes:` by path (first match wins, the rest
 * to `upstream`), each upstream with its own pool and timeouts, the rules counting whatever the route.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import type { AddressInfo } from 'node:net';
import { send } from '../support/http.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { ConfigError, parseConfig } from '../../src/config/index.js';
import { runCli } from '../support/process.js';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

let web: RecordingUpstream;
let streaming: RecordingUpstream;
let gw: TestGateway | undefined;

beforeAll(async () => {
  [web, streaming] = await Promise.all([startRecordingUpstream(), startRecordingUpstream()]);
});
afterAll(async () => Promise.all([web.close(), streaming.close()]));
afterEach(async () => {
  await gw?.shutdown(200);
  gw = undefined;
});

function table(streamingUrl: string, extra = ''): string {
  return `upstream: { timeout: 300ms }
upstreams:
  streaming: { url: ${streamingUrl}, timeout: 0 }
routes:
  - { match: /api/v1/streaming/*, upstream: streaming }
  - { match: /api/v1/streaming, upstream: streaming }
limits:
  - { name: api, match: /api/*, per: ip, limit: 5, period: 1h }
${extra}`;
}

describe('routes to several upstreams', () => {
  it('sends the streaming path to its upstream and the rest to upstream; one rule counts both', async () => {
    gw = await startTestGateway(table(streaming.url), { upstream: web.url });
    const a = await send(gw!.url, { path: '/api/v1/streaming/public?x=1' });
    const b = await send(gw!.url, { path: '/api/v1/timelines/public' });
    const c = await send(gw!.url, { path: '/api/v1/streaming' });
    expect([a.status, b.status, c.status]).toEqual([200, 200, 200]);
    expect(streaming.forwarded().map((s) => s.url)).toEqual(['/api/v1/streaming/public?x=1', '/api/v1/streaming']);
    expect(web.forwarded().map((s) => s.url)).toEqual(['/api/v1/timelines/public']);
    expect([a, b, c].map((r) => r.headers['x-ratelimit-remaining'])).toEqual(['4', '3', '2']);
  });

  it('each upstream has its own timeouts: the slow default times out, the streaming one (timeout 0) does not', async () => {
    gw = await startTestGateway(table(streaming.url), { upstream: web.url });
    const slow = (_req: unknown, res: import('node:http').ServerResponse) =>
      setTimeout(() => res.writeHead(200).end('late'), 1500);
    web.route('/api/v1/slow', slow);
    streaming.route('/api/v1/streaming/slow', slow);
    const timedOut = await send(gw!.url, { path: '/api/v1/slow' });
    expect(timedOut.status).toBe(504);
    const streamed = await send(gw!.url, { path: '/api/v1/streaming/slow' });
    expect(streamed.status).toBe(200);
    expect(streamed.body).toBe('late');
  });

  it('tunnels a WebSocket on a routed path to that upstream', async () => {
    const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await new Promise((r) => wss.once('listening', r));
    wss.on('connection', (ws, req) => ws.on('message', (m) => ws.send(`streaming ${req.url} ${m.toString()}`)));
    try {
      gw = await startTestGateway(table(`http://127.0.0.1:${(wss.address() as AddressInfo).port}`), {
        upstream: web.url,
      });
      const ws = new WebSocket(gw!.url.replace('http', 'ws') + '/api/v1/streaming?stream=public');
      await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
      const reply = new Promise<string>((r) => ws.once('message', (m) => r(m.toString())));
      ws.send('hi');
      expect(await reply).toBe('streaming /api/v1/streaming?stream=public hi');
      ws.close();
    } finally {
      await new Promise<void>((r) => wss.close(() => r()));
    }
  });
});

describe('checking routes', () => {
  it('refuses a route to an unknown upstream, naming the path, in serve and in rategate check', async () => {
    const text = `upstreams:\n  streaming: { url: http://127.0.0.1:4000 }\nroutes:\n  - { match: /api/v1/streaming/*, upstream: streeming }\n`;
    let error: unknown;
    try {
      parseConfig(text, 'limits.yaml');
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = 'routes[0].upstream: unknown upstream "streeming" (upstreams: streaming)';
    expect((error as ConfigError).errors).toContain(message);
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'rategate-routes-')), 'limits.yaml');
    writeFileSync(file, text);
    const check = await runCli(['check', file]);
    expect(check.code).toBe(78);
    expect(check.stderr + check.stdout).toContain(message);
  });

  it('rategate check prints the routes in order; changing upstreams or routes applies at restart', async () => {
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'rategate-routes-')), 'limits.yaml');
    writeFileSync(file, table('http://127.0.0.1:4000'));
    const check = await runCli(['check', file]);
    expect(check.code).toBe(0);
    expect(check.stdout).toContain(
      '; routes: /api/v1/streaming/* → streaming (http://127.0.0.1:4000), /api/v1/streaming → streaming (http://127.0.0.1:4000)',
    );
    const { configChanges } = await import('../../src/config/changes.js');
    const before = parseConfig(table('http://127.0.0.1:4000'), 'a.yaml').config;
    const after = parseConfig(
      table('http://127.0.0.1:4001').replace('/api/v1/streaming/*', '/api/v2/streaming/*'),
      'b.yaml',
    ).config;
    expect(configChanges(before, after)).toEqual({ live: [], atRestart: ['upstreams.streaming.url', 'routes'] });
  });

  it('refuses builtin and a URL with a path as a named upstream', () => {
    expect(() => parseConfig('upstreams:\n  s: { url: builtin }\n', 'l.yaml')).toThrow(/upstreams\.s\.url/);
    expect(() => parseConfig('upstreams:\n  s: { url: "http://x:1/base" }\n', 'l.yaml')).toThrow(/upstreams\.s\.url/);
  });
});

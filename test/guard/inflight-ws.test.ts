/** In-flight limits on WebSocket upgrades: a tunnel holds its slot for its life and gives it back when it closes. */
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { eventually } from '../support/eventually.js';

let wss: WebSocketServer;
let gw: TestGateway;

beforeAll(async () => {
  wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((r) => wss.once('listening', r));
  gw = await startTestGateway(`concurrency:\n  - { name: streams, match: GET /api/v1/streaming, per: ip, max: 1 }\n`, {
    upstream: `http://127.0.0.1:${(wss.address() as AddressInfo).port}`,
  });
});
afterAll(async () => {
  await gw.shutdown(100);
  await new Promise<void>((r) => wss.close(() => r()));
});

function connect(): Promise<{ ws: WebSocket; status: number; retryAfter?: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(gw.url.replace('http', 'ws') + '/api/v1/streaming');
    ws.once('open', () => resolve({ ws, status: 101 }));
    ws.once('unexpected-response', (_req, res) => {
      res.resume();
      res.on('end', () =>
        resolve({ ws, status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] as string }),
      );
    });
    ws.once('error', reject);
  });
}

describe('concurrency on upgrades', () => {
  it('a second stream of the same client is refused 429 while the first is open, admitted once it closed', async () => {
    const first = await connect();
    expect(first.status).toBe(101);
    const second = await connect();
    expect(second).toMatchObject({ status: 429, retryAfter: '1' });
    await new Promise<void>((r) => {
      first.ws.once('close', () => r());
      first.ws.close();
    });
    await eventually(() => gw.guard.slots.inFlight('streams:{ip:127.0.0.1}') === 0, {
      what: 'the slot released after the tunnel closed',
    });
    const third = await connect();
    expect(third.status).toBe(101);
    third.ws.terminate();
  });
});

/** Expect: 100-continue decided by the handler: 100 only when admitted, the refusal first otherwise. */
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { continueNow } from '../../src/http/expect-continue.js';

let server: http.Server;
let port: number;

beforeAll(async () => {
  const handler: http.RequestListener = (req, res) => {
    if (req.headers['x-over-limit'] === '1') {
      res.writeHead(429, { 'content-type': 'application/json', connection: 'close' });
      res.end('{"error":"Too many requests"}');
      return;
    }
    continueNow(req, res);
    let bytes = 0;
    req.on('data', (c: Buffer) => (bytes += c.length));
    req.on('end', () => res.end(JSON.stringify({ bytes })));
  };
  server = http.createServer(handler);
  server.on('checkContinue', handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

/** Sends the head only, returns the first bytes the server answers, then sends the body if asked. */
function exchange(extra: string, bodyAfterContinue: Buffer | null): Promise<{ first: string; all: string }> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let all = '';
    let first = '';
    s.on('data', (c: Buffer) => {
      const text = c.toString('latin1');
      if (first === '') {
        first = text;
        if (text.startsWith('HTTP/1.1 100') && bodyAfterContinue !== null) s.write(bodyAfterContinue);
      }
      all += text;
      if (/\r\n\r\n\{.*\}$/s.test(all)) s.end();
    });
    s.on('end', () => resolve({ first, all }));
    s.on('error', reject);
    const len = bodyAfterContinue?.length ?? 2 * 1024 * 1024;
    s.write(`POST /api/v2/media HTTP/1.1\r\nHost: x\r\nContent-Length: ${len}\r\nExpect: 100-continue\r\n${extra}\r\n`);
  });
}

describe('Expect: 100-continue', () => {
  it('answers 100 Continue once admitted, then the body streams and the request completes', async () => {
    const body = Buffer.alloc(2 * 1024 * 1024, 1);
    const r = await exchange('', body);
    expect(r.first.startsWith('HTTP/1.1 100 Continue')).toBe(true);
    expect(r.all).toContain('HTTP/1.1 200');
    expect(r.all).toContain(`{"bytes":${body.length}}`);
  });

  it('sends the refusal as the first bytes, never a 100 Continue, when over the limit', async () => {
    const r = await exchange('X-Over-Limit: 1\r\n', null);
    expect(r.first.startsWith('HTTP/1.1 429')).toBe(true);
    expect(r.all).not.toContain('100 Continue');
  });
});

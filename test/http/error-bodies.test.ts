/**
 * Issue 41: every body the gateway writes itself carries the catalogue's `code` beside `"error"` (as
 * fastify writes its own) but the two SPEC spells byte for byte (403 Forbidden, the default 429), on a response and raw on a socket alike, and a client error the listener
 * answers says which it is; the process answers after each.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_BODIES, GATEWAY_ERRORS, badPathBody, errorBody, type GatewayErrorCode } from '../../src/http/errors.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { send } from '../support/http.js';

describe('gateway error bodies', () => {
  it('are {"error": message, "code": CODE} for every code of the catalogue, the message first; the two SPEC spells are exact', () => {
    const spelled: Record<string, string> = {
      FORBIDDEN: '{"error":"Forbidden"}',
      RATE_LIMITED: '{"error":"Too many requests"}',
    };
    for (const [code, e] of Object.entries(GATEWAY_ERRORS)) {
      const text = ERROR_BODIES[code as GatewayErrorCode].toString('utf8');
      expect(text, code).toBe(spelled[code] ?? JSON.stringify({ error: e.message, code }));
    }
    expect(JSON.parse(badPathBody('a NUL byte').toString())).toEqual({
      error: 'Bad request path: a NUL byte',
      code: 'BAD_PATH',
    });
    expect(JSON.parse(errorBody('PARAM_CONFLICT', 'Bad request: x is given twice').toString())).toEqual({
      error: 'Bad request: x is given twice',
      code: 'PARAM_CONFLICT',
    });
  });
});

describe('on the wire', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway('limits:\n  - { name: one, match: /x, per: ip, limit: 1, period: 1h }\n', {
      upstream: 'http://127.0.0.1:9',
    });
  });
  afterAll(async () => gw?.shutdown(0));

  it('the 429 by default, a bad path, and an upstream that cannot be reached carry their codes', async () => {
    await send(gw.url, { path: '/x' });
    const limited = await send(gw.url, { path: '/x' });
    expect(limited.status).toBe(429);
    expect(JSON.parse(limited.body)).toEqual({ error: 'Too many requests' });
    const badPath = await send(gw.url, { path: '/a/%2e%2e%2f%00' });
    expect(badPath.status).toBe(400);
    expect(JSON.parse(badPath.body)).toMatchObject({ code: 'BAD_PATH' });
    const unreachable = await send(gw.url, { path: '/y' });
    expect(unreachable.status).toBe(502);
    expect(JSON.parse(unreachable.body)).toEqual({ error: 'Upstream unreachable', code: 'UPSTREAM_UNREACHABLE' });
  });

  it('a head too large, answered raw on the socket by the listener, carries HEADERS_TOO_LARGE; the gateway answers after it', async () => {
    const url = new URL(gw.url);
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(url.port), url.hostname, () =>
        socket.write(`GET /y HTTP/1.1\r\nHost: a\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`),
      );
      let text = '';
      socket.on('data', (d) => (text += d.toString('latin1')));
      socket.on('close', () => resolve(text));
      socket.on('error', (err) => (text === '' ? reject(err) : resolve(text)));
    });
    expect(raw).toMatch(/^HTTP\/1\.1 431 /);
    expect(raw.slice(raw.indexOf('\r\n\r\n') + 4)).toBe(ERROR_BODIES.HEADERS_TOO_LARGE.toString('utf8'));
    expect((await send(gw.url, { path: '/y' })).status).toBe(502);
  });
});

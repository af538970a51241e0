/**
 * Issue 38 finding 6 through the real process: no log line carries a credential a request brought in
 * its query string or body, whatever ended the request (refused by the parser, a bad path, a block, a
 * 429, the drain, forwarded, an upgrade). Every line the process writes is searched for the secrets.
 */
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { limitsFile, upstreamFixture } from '../support/gateway.js';
import { spawnServe, waitFor, type GatewayProcess } from '../support/process.js';

const upstream = upstreamFixture();

const TABLE = `
limits:
  - { name: tight, match: GET /api/v1/timelines/public, per: ip, limit: 1, period: 1h }
block: { ips: [198.51.100.66] }
`;

/** Every secret the requests carry starts so: no line of the log may contain it. */
const SECRET = 's3cr3t';

/** Writes `text` on a fresh connection; resolves with the answer's head once it came (or what came before the gateway closed). */
function raw(gw: GatewayProcess, text: string): Promise<string> {
  const { port } = new URL(gw.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1', () => socket.write(text));
    let answer = '';
    socket.on('data', (c: Buffer) => {
      answer += c.toString('latin1');
      // One answer is enough: a keep-alive connection would otherwise wait for its timeout.
      if (/\r\n\r\n/.test(answer)) socket.destroy();
    });
    socket.on('close', () => resolve(answer));
    socket.on('error', (err: NodeJS.ErrnoException) => (err.code === 'ECONNRESET' ? resolve(answer) : reject(err)));
  });
}

const get = (target: string, extra = ''): string => `GET ${target} HTTP/1.1\r\nHost: gw.test\r\n${extra}\r\n`;
const statusOf = (answer: string): string => answer.slice(9, 12);

describe('the log of the real process', () => {
  it('carries no query or body credential on any ending, and the gateway answers after each', async () => {
    const gw = await spawnServe(['--config', limitsFile(TABLE), '--upstream', upstream.url]);
    try {
      // Rejected by the path check, with every spelling Rack would read as the same parameter.
      expect(
        statusOf(
          await raw(gw, get(`/%zz?access_token=${SECRET}-1&client_secret=${SECRET}-2;user%5Bpassword%5D=${SECRET}-3`)),
        ),
      ).toBe('400');
      expect(
        statusOf(await raw(gw, get(`/api/%zz?access%5Ftoken=${SECRET}-4&Refresh_Token=${SECRET}-5&code=${SECRET}-6`))),
      ).toBe('400');
      // A raw `#` in the query is forwarded as sent; what follows it is never logged.
      expect(statusOf(await raw(gw, get(`/api/v1/accounts?a=1#access_token=${SECRET}-7`)))).toBe('200');
      // Refused by the parser (a head over the limit): the clientError path.
      expect(
        statusOf(
          await raw(gw, get(`/api/v1/accounts?access_token=${SECRET}-8`, `X-Big: ${'a'.repeat(64 * 1024)}\r\n`)),
        ),
      ).toBe('431');
      // Blocked before the path is read.
      expect(
        statusOf(await raw(gw, get(`/api/v1/accounts?password=${SECRET}-9`, 'X-Forwarded-For: 198.51.100.66\r\n'))),
      ).toBe('403');
      // Forwarded, then limited.
      expect(statusOf(await raw(gw, get(`/api/v1/timelines/public?access_token=${SECRET}-10`)))).toBe('200');
      expect(statusOf(await raw(gw, get(`/api/v1/timelines/public?token=${SECRET}-11`)))).toBe('429');
      // A body's credentials.
      const form = `grant_type=password&password=${SECRET}-12&client_secret=${SECRET}-13`;
      const post = `POST /oauth/token HTTP/1.1\r\nHost: gw.test\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ${form.length}\r\n\r\n${form}`;
      expect(statusOf(await raw(gw, post))).toBe('200');
      // An upgrade refused for its path.
      const upgrade = `Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n`;
      expect(statusOf(await raw(gw, get(`/api/v1/%zz/streaming?access_token=${SECRET}-14`, upgrade)))).toBe('400');
      expect(statusOf(await raw(gw, get('/api/v1/accounts')))).toBe('200');

      // Answered 503 during the drain: the head is half sent when SIGTERM arrives.
      const { port } = new URL(gw.url);
      const socket = net.connect(Number(port), '127.0.0.1');
      await new Promise((r) => socket.once('connect', r));
      socket.write(`GET /api/v1/accounts?access_token=${SECRET}-15 HTTP/1.1\r\n`);
      await new Promise((r) => setTimeout(r, 200));
      gw.child.kill('SIGTERM');
      await waitFor(() => gw.output().includes('"msg":"draining'), 10_000, 'the drain to start');
      const answer = new Promise<string>((resolve) => {
        let text = '';
        socket.on('data', (c: Buffer) => (text += c.toString('latin1')));
        socket.once('close', () => resolve(text));
      });
      socket.end('Host: gw.test\r\n\r\n');
      expect(statusOf(await answer)).toBe('503');
      expect(await gw.exited).toBe(0);
    } finally {
      if (gw.child.exitCode === null) gw.child.kill('SIGKILL');
    }
    const out = gw.output();
    const access = out.split('\n').filter((l) => l.includes('"msg":"request"'));
    expect(access.map((l) => (JSON.parse(l) as { status: number }).status).sort()).toEqual([
      200, 200, 200, 200, 400, 400, 400, 403, 429, 503,
    ]);
    expect(out).toContain('access_token=[redacted]');
    for (const line of out.split('\n')) expect(line).not.toContain(SECRET);
  });
});

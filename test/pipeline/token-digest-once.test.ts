/**
 * Each request fact once: a request's token is hashed (SHA-256) once, however many stages read its
 * digest — the account (token mode), a `per: token` limit, a `per: token` ban and in-flight limit — and
 * its account is found once for the guard stage and the limit decision alike. Nor again for the same
 * token on the same keep-alive connection; but never reused across connections.
 */
import http from 'node:http';
import http2 from 'node:http2';
import crypto from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { MEMO_MAX } from '../../src/identity/connection-memo.js';
import { send } from '../support/http.js';
import { gatewayFixture, startTestGateway } from '../support/gateway.js';

const hashed: string[] = [];
vi.mock('node:crypto', async (original) => {
  const real = await original<typeof crypto>();
  const hash = (algorithm: string, data: crypto.BinaryLike, encoding?: crypto.BinaryToTextEncoding) => {
    if (typeof data === 'string') hashed.push(data);
    return real.hash(algorithm, data, encoding);
  };
  return { ...real, default: { ...real, hash }, hash };
});

const fx = gatewayFixture({ graceMs: 200 });

describe('the token', () => {
  it('is hashed once per request however many stages key on it', async () => {
    fx.gw = await startTestGateway(
      `clients: { account: { from: token } }
limits:
  - { name: per-account, match: /api/*, per: account, limit: 50, period: 1m }
  - { name: per-token, match: /api/*, per: token, limit: 50, period: 1m }
bans:
  - { name: token-ban, match: /api/*, per: token, limit: 100, period: 1m, ban: 1h }
concurrency:
  - { name: token-slots, match: /api/*, per: account, max: 10 }
`,
      { upstream: fx.upstream.url },
    );
    const token = 'a-token-hashed-once';
    hashed.length = 0;
    const a = await send(fx.gw.url, { path: '/api/v1/x', headers: { Authorization: `Bearer ${token}` } });
    expect(a.status).toBe(200);
    expect(hashed.filter((d) => d === token)).toHaveLength(1);
  });

  it('is hashed once per connection for the same token, again for another token or on another connection', async () => {
    const gw = (fx.gw = await startTestGateway(
      `clients: { account: { from: token } }
limits:
  - { name: per-account, match: /api/*, per: account, limit: 50, period: 1m }
`,
      { upstream: fx.upstream.url },
    ));
    const one = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const other = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const get = async (agent: http.Agent, token: string) => {
        const a = await send(gw.url, { path: '/api/v1/x', headers: { Authorization: `Bearer ${token}` }, agent });
        expect(a.status).toBe(200);
        expect(a.headers['x-ratelimit-limit']).toBe('50');
        return a;
      };
      hashed.length = 0;
      const [t1, t2] = ['token-one-on-a-connection', 'token-two-on-a-connection'];
      await get(one, t1);
      await get(one, t1);
      await get(one, t1);
      expect(hashed.filter((d) => d === t1)).toHaveLength(1);
      await get(one, t2);
      await get(one, t1);
      expect(hashed.filter((d) => d === t2)).toHaveLength(1);
      expect(hashed.filter((d) => d === t1)).toHaveLength(2);
      // Another connection with the same token: hashed anew, no entry shared between connections.
      await get(other, t1);
      expect(hashed.filter((d) => d === t1)).toHaveLength(3);
      // A token too long to keep (a large JWT, or a flood of huge ones) is hashed each time, never held.
      const long = 'L'.repeat(MEMO_MAX + 1);
      await get(other, long);
      await get(other, long);
      expect(hashed.filter((d) => d === long)).toHaveLength(2);
      // Every request was counted in its own token's bucket: this is t1's sixth (t2's one is not in it).
      const last = await get(one, t1);
      expect(last.headers['x-ratelimit-remaining']).toBe('44');
    } finally {
      one.destroy();
      other.destroy();
    }
  });

  it('is hashed once per HTTP/2 session, whose streams share it, and again on another session', async () => {
    const gw = (fx.gw = await startTestGateway(
      `clients: { account: { from: token } }
limits:
  - { name: per-account, match: /api/*, per: account, limit: 50, period: 1m }
`,
      { upstream: fx.upstream.url },
    ));
    const token = 'token-on-an-h2-session';
    const get = (session: http2.ClientHttp2Session): Promise<number> =>
      new Promise((resolve, reject) => {
        const s = session.request({ ':path': '/api/v1/x', authorization: `Bearer ${token}` });
        s.on('response', (h) => {
          s.resume();
          s.on('end', () => resolve(Number(h[':status'])));
        });
        s.on('error', reject);
        s.end();
      });
    // h2c with prior knowledge on the plain port.
    const one = http2.connect(gw.url);
    const other = http2.connect(gw.url);
    try {
      hashed.length = 0;
      expect([await get(one), await get(one), await get(one)]).toEqual([200, 200, 200]);
      expect(hashed.filter((d) => d === token)).toHaveLength(1);
      expect(await get(other)).toBe(200);
      expect(hashed.filter((d) => d === token)).toHaveLength(2);
    } finally {
      one.close();
      other.close();
    }
  });
});

/**
 * The new key kinds keep the early refusal: a request refused by a bucket that needs no account
 * (header, parameter, token) costs the upstream no introspection call, even with a fresh token each time.
 */
import { describe, expect, it } from 'vitest';
import { startTestGateway, gatewayFixture } from '../support/gateway.js';
import { VERIFY } from '../support/recording-upstream.js';

const fx = gatewayFixture({ graceMs: 200 });

describe('a flood refused by a header, parameter or token bucket costs the upstream nothing', () => {
  it.each([
    [
      'header:X-App-Id',
      (i: number) => ({
        path: '/api/v1/timelines/home',
        headers: { 'X-App-Id': 'app-1', Authorization: `Bearer user-${i}` },
      }),
    ],
    [
      'param:user[email]',
      (i: number) => ({
        path: '/api/v1/timelines/home?user[email]=a@example.com',
        headers: { Authorization: `Bearer user-${i}` },
      }),
    ],
  ])('per %s: 20 over-limit requests with fresh tokens make no introspection call', async (per, request) => {
    fx.gw = await startTestGateway(
      `limits:
  - { name: keyed, match: /api/*, per: "${per}", limit: 2, period: 5m }
  - { name: account-access, match: /api/*, per: account, limit: 300, period: 5m }
`,
      { upstream: fx.upstream.url },
    );
    const introspections = () => fx.upstream.seen.filter((s) => s.url === VERIFY).length;
    for (let i = 0; i < 2; i++) {
      const r = request(i);
      expect((await fetch(`${fx.gw.url}${r.path}`, { headers: r.headers })).status).toBe(200);
    }
    const before = introspections();
    for (let i = 100; i < 120; i++) {
      const r = request(i);
      const res = await fetch(`${fx.gw.url}${r.path}`, { headers: r.headers });
      expect(res.status).toBe(429);
      expect(res.headers.get('x-ratelimit-limit')).toBe('2');
    }
    expect(introspections() - before).toBe(0);
  });

  it('per token: a token over its limit is refused without an introspection call once its answer expired', async () => {
    fx.gw = await startTestGateway(
      `clients: { account: { cacheTtl: 0 } }
limits:
  - { name: per-token, match: /api/*, per: token, limit: 2, period: 5m }
  - { name: account-access, match: /api/*, per: account, limit: 300, period: 5m }
`,
      { upstream: fx.upstream.url },
    );
    const introspections = () => fx.upstream.seen.filter((s) => s.url === VERIFY).length;
    const get = () => fetch(`${fx.gw!.url}/api/v1/timelines/home`, { headers: { Authorization: 'Bearer user-5' } });
    for (let i = 0; i < 2; i++) expect((await get()).status).toBe(200);
    const before = introspections();
    for (let i = 0; i < 10; i++) expect((await get()).status).toBe(429);
    expect(introspections() - before).toBe(0);
  });
});

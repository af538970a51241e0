/**
 * The new key kinds and overrides count the same in every store (leases on and off) and the three algorithms: a
 * parameter rule with a key override and a token rule, through the real gateway.
 */
import { describe, expect, it } from 'vitest';
import { startTestGateway } from '../support/gateway.js';
import { send } from '../support/http.js';
import { storeMatrix } from '../support/store-matrix.js';

const stores = storeMatrix('limit model');
const ALGORITHMS = ['fixed-window', 'sliding-window', 'token-bucket'] as const;
let run = 0;

describe.each(stores.cases)('in the $name store', ({ url, lease, skip }) => {
  it.skipIf(skip).each(ALGORITHMS)(
    '%s: per-parameter buckets with a key override, and per-token buckets',
    async (algorithm) => {
      const gw = await startTestGateway(
        `store: { prefix: "lm${process.pid}-${++run}", lease: ${lease} }
limits:
  - name: resets
    match: POST /auth/password(.:format)
    per: "param:user[email]"
    algorithm: ${algorithm}
    limit: 2
    period: 1h
    overrides: [{ keys: [vip@example.com], limit: 3 }]
  - { name: per-token, match: /api/*, per: token, algorithm: ${algorithm}, limit: 2, period: 1h }
`,
        { upstream: stores.upstream().url, store: url() },
      );
      try {
        const reset = (email: string, ip: string) =>
          send(gw.url, {
            method: 'POST',
            path: `/auth/password.json?user[email]=${email}`,
            headers: { 'X-Forwarded-For': ip },
          });
        const statuses = async (email: string, n: number) => {
          const out: number[] = [];
          for (let i = 0; i < n; i++) out.push((await reset(email, `198.51.100.${i + 1}`)).status);
          return out;
        };
        expect(await statuses('a@example.com', 3)).toEqual([200, 200, 429]);
        expect(await statuses('vip@example.com', 4)).toEqual([200, 200, 200, 429]);
        const vip = await reset('vip@example.com', '203.0.113.1');
        expect(vip.headers['x-ratelimit-limit']).toBe('3');
        expect(vip.headers['ratelimit-policy']).toBe('"resets";q=3;w=3600');
        expect(await statuses('b@example.com', 1)).toEqual([200]);

        const api = (token: string) =>
          send(gw.url, {
            path: '/api/v1/x',
            headers: { Authorization: `Bearer ${token}`, 'X-Forwarded-For': '192.0.2.1' },
          });
        expect([
          (await api('t1')).status,
          (await api('t1')).status,
          (await api('t1')).status,
          (await api('t2')).status,
        ]).toEqual([200, 200, 429, 200]);
      } finally {
        await gw.shutdown(500);
      }
    },
  );
});

/**
 * `per: jwt:CLAIM` through the real gateway: a claim of the bearer token read as an unverified JWT, one
 * bucket per claim value whatever the token or IP, wherever Doorkeeper reads the token; its overrides,
 * the admin API's bucket and triage views, and `explain`, all from the one key-kind table.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { explain } from '../../src/cli/explain.js';
import { FakeClock } from '../support/clock.js';
import { send } from '../support/http.js';
import { gatewayFixture, startTestGateway } from '../support/gateway.js';

const fx = gatewayFixture({ graceMs: 200 });

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
/** An unsigned-looking JWT: the gateway verifies nothing, so the signature's bytes do not matter. */
const jwt = (claims: Record<string, unknown>) => `${b64({ alg: 'RS256', typ: 'JWT' })}.${b64(claims)}.c2lnbmF0dXJl`;

const TABLE = `limits:
  - name: tenants
    match: /api/*
    per: "jwt:tenant"
    limit: 2
    period: 10m
    overrides: [{ keys: [big-customer], limit: 4 }]
  - { name: per-ip, match: /api/*, per: ip, limit: 100, period: 10m }
`;

function get(path: string, ip: string, token?: string) {
  return send(fx.gw!.url, {
    path,
    headers: { 'X-Forwarded-For': ip, ...(token === undefined ? {} : { Authorization: `Bearer ${token}` }) },
  });
}

describe('per: jwt:CLAIM', () => {
  it('counts one claim value across tokens and IPs, wherever the token was sent, and skips a request without the claim', async () => {
    fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url, now: new FakeClock().now });
    const first = await get('/api/v1/a', '198.51.100.1', jwt({ sub: 'u1', tenant: 'acme' }));
    expect(first.status).toBe(200);
    expect(first.headers['ratelimit-policy']).toBe('"tenants";q=2;w=600, "per-ip";q=100;w=600');
    // Another user's token of the same tenant, from another IP, sent as a query parameter (Doorkeeper reads it there too).
    const second = await send(fx.gw.url, {
      path: `/api/v1/b?access_token=${jwt({ sub: 'u2', tenant: 'acme' })}`,
      headers: { 'X-Forwarded-For': '198.51.100.2' },
    });
    expect(second.headers['x-ratelimit-remaining']).toBe('0');
    expect((await get('/api/v1/c', '198.51.100.3', jwt({ sub: 'u3', tenant: 'acme' }))).status).toBe(429);
    // A number claim is its decimal text; another tenant is another bucket.
    expect((await get('/api/v1/d', '198.51.100.3', jwt({ tenant: 7 }))).headers['x-ratelimit-remaining']).toBe('1');
    expect((await get('/api/v1/d', '198.51.100.3', jwt({ tenant: '7' }))).headers['x-ratelimit-remaining']).toBe('0');
    // No claim, no JWT, no token: the rule is skipped (the per-IP rule still counts).
    for (const token of [jwt({ sub: 'x' }), 'opaque-token', undefined]) {
      const r = await get('/api/v1/e', '198.51.100.4', token);
      expect(r.status).toBe(200);
      expect(r.headers['ratelimit-policy']).toBe('"per-ip";q=100;w=600');
    }
    // A hostile token leaves the process answering.
    expect((await get('/api/v1/f', '198.51.100.5', `${'a'.repeat(3000)}.${'b'.repeat(3000)}.c`)).status).toBe(200);
  });

  it('gives a claim value named in overrides.keys its own limit, and the admin API finds and shows its bucket', async () => {
    fx.gw = await startTestGateway(TABLE, { upstream: fx.upstream.url, now: new FakeClock().now });
    for (let i = 0; i < 4; i++)
      expect(
        (await get('/api/v1/x', '203.0.113.1', jwt({ tenant: 'big-customer' }))).headers['x-ratelimit-limit'],
      ).toBe('4');
    expect((await get('/api/v1/x', '203.0.113.1', jwt({ tenant: 'big-customer' }))).status).toBe(429);
    for (let i = 0; i < 3; i++) await get('/api/v1/x', '203.0.113.2', jwt({ tenant: 'acme' }));
    const digest = createHash('sha256').update('acme').digest('hex');
    const bucket = (await (await fetch(`${fx.gw.adminUrl}/admin/buckets?rule=tenants&key=acme`)).json()) as Record<
      string,
      unknown
    >;
    expect(bucket).toMatchObject({ key: `tenants:{jwt:${digest}}`, remaining: 0, limited: true });
    const own = (await (await fetch(`${fx.gw.adminUrl}/admin/buckets?rule=tenants&key=big-customer`)).json()) as Record<
      string,
      unknown
    >;
    expect(own).toMatchObject({ override: 0, limit: 4, remaining: 0 });
    const rules = (await (await fetch(`${fx.gw.adminUrl}/admin/buckets`)).json()) as { rules: { per: string }[] };
    expect(rules.rules.map((r) => r.per)).toEqual(['jwt:tenant', 'ip']);
    const limited = (await (await fetch(`${fx.gw.adminUrl}/admin/limited?rule=tenants`)).json()) as {
      top: { key: string }[];
    };
    expect(limited.top.map((k) => k.key).sort()).toEqual(
      [
        `jwt ${digest.slice(0, 16)}`,
        `jwt ${createHash('sha256').update('big-customer').digest('hex').slice(0, 16)} (override 0)`,
      ].sort(),
    );
  });
});

describe('per: jwt:CLAIM in the config and in explain', () => {
  it('refuses a claim name that is not one, and accepts overrides keys for it', () => {
    expect(() => parseConfig('limits: [{ name: a, match: /x, per: "jwt:", limit: 1, period: 1m }]', 't.yaml')).toThrow(
      /invalid claim name ""/,
    );
    expect(() =>
      parseConfig('limits: [{ name: a, match: /x, per: "jwt:a b", limit: 1, period: 1m }]', 't.yaml'),
    ).toThrow(/invalid claim name "a b"/);
    const snap = parseConfig(TABLE, 't.yaml');
    expect(snap.rules[0]!.key.label).toBe('jwt:tenant');
  });

  it('explain shows the claim it keys on, or why the rule is skipped', async () => {
    const snap = parseConfig(TABLE, 't.yaml');
    const lines = await explain(snap, {
      request: 'GET /api/v1/x',
      headers: [`Authorization: Bearer ${jwt({ tenant: 'acme' })}`],
      ip: '203.0.113.9',
    });
    expect(lines).toContain(
      `   1. tenants: yes, per jwt:tenant (+1 override), 2/10m, key: JWT claim tenant "acme", digest ${createHash('sha256').update('acme').digest('hex').slice(0, 12)}…`,
    );
    const without = await explain(snap, {
      request: 'GET /api/v1/x',
      headers: ['Authorization: Bearer opaque'],
      ip: '203.0.113.9',
    });
    expect(without).toContain('   1. tenants: no (no key: the request has no JWT claim tenant)');
  });
});

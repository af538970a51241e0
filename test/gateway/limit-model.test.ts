/**
 * The limit model of SPEC §3.1 through the real gateway, in front of the built-in upstream: token,
 * header and parameter keys, `when`, overrides, `(.:format)` and `block`, on real sockets with a fake
 * clock driving the store.
 */
import { writeFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startUpstream, type RunningUpstream } from '../../src/mastodon/index.js';
import { FakeClock } from '../support/clock.js';
import { send, type Answer } from '../support/http.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { newUser, call } from '../mastodon/support.js';

const T0 = Date.UTC(2026, 10, 21, 19, 0, 0);
let upstream: RunningUpstream;
let gw: TestGateway | undefined;

beforeAll(async () => {
  upstream = await startUpstream({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => upstream.close());
afterEach(async () => {
  await gw?.shutdown(1000);
  gw = undefined;
});

async function gateway(yaml: string): Promise<TestGateway> {
  const clock = new FakeClock(T0 + 60_000);
  gw = await startTestGateway(yaml, { upstream: upstream.url, now: clock.now });
  return gw;
}

function req(
  method: string,
  path: string,
  ip: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<Answer> {
  return send(gw!.url, {
    method,
    path,
    headers: { 'X-Forwarded-For': ip, ...headers },
    ...(body === undefined ? {} : { body }),
  });
}

/** A second token for the same account: the password grant, as a Mastodon app logs a user in again. */
async function secondToken(user: { email: string; password: string }): Promise<string> {
  const app = await call(upstream.url, 'POST', '/api/v1/apps', {
    form: { client_name: 'second', redirect_uris: 'urn:ietf:wg:oauth:2.0:oob', scopes: 'read write' },
  });
  const res = await call(upstream.url, 'POST', '/oauth/token', {
    form: {
      grant_type: 'password',
      client_id: app.body.client_id,
      client_secret: app.body.client_secret,
      username: user.email,
      password: user.password,
      scope: 'read write',
    },
  });
  expect(res.status).toBe(200);
  return res.body.access_token as string;
}

describe('per: token and per: account side by side', () => {
  it('two tokens of one account have their own token buckets and share the account bucket', async () => {
    await gateway(`
limits:
  - { name: per-account, match: /api/*, per: account, limit: 5, period: 5m }
  - { name: per-token, match: /api/*, per: token, limit: 3, period: 5m }
`);
    const user = await newUser(upstream.url);
    const other = await secondToken(user);
    const get = (token: string) =>
      req('GET', '/api/v1/accounts/verify_credentials', '198.51.100.1', { Authorization: `Bearer ${token}` });
    // Three with the first token: its token bucket (3) is then empty, the account's (5) has 2 left.
    for (let i = 0; i < 3; i++) expect((await get(user.token)).status).toBe(200);
    const refused = await get(user.token);
    expect(refused.status).toBe(429);
    expect(refused.headers['ratelimit-policy']).toContain('"per-token";q=3;w=300');
    // The second token has a fresh token bucket but spends the same account bucket: 2 more, then 429.
    const a = await get(other);
    expect(a.status).toBe(200);
    expect(a.headers.ratelimit).toBe('"per-account";r=1;t=240, "per-token";r=2;t=240');
    expect((await get(other)).status).toBe(200);
    const b = await get(other);
    expect(b.status).toBe(429);
    expect(b.headers['x-ratelimit-limit']).toBe('5');
  });
});

describe('per: token wherever the token was sent', () => {
  it('counts a token in one bucket whether it came in the header, the query or a form body', async () => {
    await gateway(`
limits:
  - { name: per-token, match: /api/*, per: token, limit: 3, period: 5m }
`);
    const user = await newUser(upstream.url);
    const ip = '198.51.100.9';
    expect(
      (await req('GET', '/api/v1/accounts/verify_credentials', ip, { Authorization: `Bearer ${user.token}` })).headers[
        'x-ratelimit-remaining'
      ],
    ).toBe('2');
    expect(
      (await req('GET', `/api/v1/accounts/verify_credentials?access_token=${user.token}`, ip)).headers[
        'x-ratelimit-remaining'
      ],
    ).toBe('1');
    const form = { 'Content-Type': 'application/x-www-form-urlencoded' };
    expect(
      (await req('POST', '/api/v1/statuses', ip, form, `access_token=${user.token}&status=hi`)).headers[
        'x-ratelimit-remaining'
      ],
    ).toBe('0');
    expect(
      (await req('GET', '/api/v1/accounts/verify_credentials', ip, { Authorization: `Bearer ${user.token}` })).status,
    ).toBe(429);
  });
});

describe('when', () => {
  it('an unauthenticated-only rule counts requests without an account and never those with one', async () => {
    await gateway(`
limits:
  - { name: anonymous-api, match: /api/*, when: { authenticated: false }, per: ip, limit: 2, period: 5m }
`);
    const user = await newUser(upstream.url);
    const ip = '198.51.100.2';
    for (let i = 0; i < 2; i++)
      expect((await req('GET', '/api/v1/statuses/1', ip)).headers['x-ratelimit-limit']).toBe('2');
    expect((await req('GET', '/api/v1/statuses/1', ip)).status).toBe(429);
    // The same IP with a token the upstream accepts: the rule does not apply, no headers, not refused.
    const authed = await req('GET', '/api/v1/accounts/verify_credentials', ip, {
      Authorization: `Bearer ${user.token}`,
    });
    expect(authed.status).toBe(200);
    expect(authed.headers['x-ratelimit-limit']).toBeUndefined();
    // A token the upstream refuses is no account: counted (and refused) like no token.
    expect((await req('GET', '/api/v1/statuses/1', ip, { Authorization: 'Bearer not-a-real-token' })).status).toBe(429);
  });

  it('a paging-only rule counts requests whose query has a non-empty paging parameter', async () => {
    await gateway(`
limits:
  - { name: paging, match: /*, when: { query: [page, min_id, max_id, since_id] }, per: ip, limit: 2, period: 15m }
`);
    const ip = '198.51.100.3';
    expect((await req('GET', '/api/v1/statuses/1?max_id=10', ip)).headers['x-ratelimit-remaining']).toBe('1');
    expect((await req('GET', '/api/v1/statuses/1?page=2&x=1', ip)).headers['x-ratelimit-remaining']).toBe('0');
    expect((await req('GET', '/api/v1/statuses/1?since_id=3', ip)).status).toBe(429);
    // A query Rails would refuse (page is a value and a hash at once) is refused, not read one way or another.
    const conflicting = await req('GET', '/api/v1/statuses/1?page=1&page[x]=2', ip);
    expect(conflicting.status).toBe(400);
    expect(conflicting.body).toBe(
      '{"error":"Bad request: the query string has conflicting parameters","code":"QUERY_CONFLICT"}',
    );
    // Not paging: no parameter, or an empty one, or another name.
    for (const q of ['', '?max_id=', '?limit=40', '?max_id=%20']) {
      const a = await req('GET', `/api/v1/statuses/1${q}`, ip);
      expect(a.status, q).not.toBe(429);
      expect(a.headers['x-ratelimit-limit'], q).toBeUndefined();
    }
  });
});

describe('per: param and (.:format)', () => {
  const TABLE = `
limits:
  - { name: resets-ip, match: POST /auth/password(.:format), per: ip, limit: 25, period: 5m }
  - { name: resets-email, match: POST /auth/password(.:format), per: "param:user[email]", limit: 5, period: 30m }
`;

  it('password resets are limited per e-mail across IPs, at /auth/password and /auth/password.json alike', async () => {
    await gateway(TABLE);
    const paths = ['/auth/password', '/auth/password.json'];
    for (let i = 0; i < 5; i++) {
      const a = await req('POST', `${paths[i % 2]}?user%5Bemail%5D=victim%40example.com`, `203.0.113.${i + 1}`);
      expect(a.status).toBe(201);
      expect(a.headers['x-ratelimit-limit']).toBe('5');
    }
    // A sixth IP, the same e-mail (padded: values are trimmed before they become keys).
    const refused = await req('POST', '/auth/password.json?user[email]=%20victim%40example.com%20', '203.0.113.99');
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe(String(29 * 60));
    // Another e-mail from that IP is fine.
    expect((await req('POST', '/auth/password.json?user[email]=other%40example.com', '203.0.113.99')).status).toBe(201);
    // Without an e-mail the e-mail rule is skipped; the IP rule still counts.
    const none = await req('POST', '/auth/password', '203.0.113.99');
    expect(none.status).toBe(422);
    expect(none.headers['ratelimit-policy']).toBe('"resets-ip";q=25;w=300');
  });
});

describe('per: header', () => {
  it('counts per header value (digested), and skips requests without the header', async () => {
    await gateway(`
limits:
  - { name: per-app, match: /api/*, per: "header:X-App-Id", limit: 2, period: 5m }
`);
    for (let i = 0; i < 2; i++)
      expect((await req('GET', '/api/v1/statuses/1', `192.0.2.${i + 1}`, { 'X-App-Id': 'app-1' })).status).toBe(404);
    expect((await req('GET', '/api/v1/statuses/1', '192.0.2.9', { 'X-App-Id': 'app-1' })).status).toBe(429);
    expect((await req('GET', '/api/v1/statuses/1', '192.0.2.9', { 'X-App-Id': 'app-2' })).status).toBe(404);
    const without = await req('GET', '/api/v1/statuses/1', '192.0.2.9');
    expect(without.status).toBe(404);
    expect(without.headers['x-ratelimit-limit']).toBeUndefined();
  });

  it('reads the header in any spelling Puma reads as it (`X_App_Id`, `x-app_id`), the dashed one first, as Rack::Attack would', async () => {
    await gateway(`
limits:
  - { name: per-app, match: /api/*, per: "header:X-App-Id", limit: 2, period: 5m }
`);
    expect((await req('GET', '/api/v1/statuses/1', '192.0.2.21', { X_App_Id: 'app-3' })).status).toBe(404);
    expect((await req('GET', '/api/v1/statuses/1', '192.0.2.22', { 'x-app_id': 'app-3' })).status).toBe(404);
    expect((await req('GET', '/api/v1/statuses/1', '192.0.2.23', { X_App_Id: 'app-3' })).status).toBe(429);
    // Both sent: Puma keeps the dashed one (its underscore spelling cannot clobber it), so does the gateway.
    const both = await req('GET', '/api/v1/statuses/1', '192.0.2.24', { 'X-App-Id': 'app-4', X_App_Id: 'app-3' });
    expect(both.status).toBe(404);
    expect(both.headers['x-ratelimit-remaining']).toBe('1');
  });
});

describe('overrides', () => {
  it('a client an override names gets its limit in a bucket of its own, and the headers show that limit', async () => {
    await gateway(`
limits:
  - name: api
    match: /api/*
    per: ip
    limit: 2
    period: 5m
    overrides:
      - { ips: [203.0.113.0/24], limit: 4 }
  - name: per-app
    match: /api/v1/apps
    per: "header:X-App-Id"
    limit: 1
    period: 5m
    overrides:
      - { keys: [trusted-app], limit: 3 }
`);
    const partner = '203.0.113.50';
    for (let i = 0; i < 4; i++) {
      const a = await req('GET', '/api/v1/statuses/1', partner);
      expect(a.headers['x-ratelimit-limit']).toBe('4');
      expect(a.headers['ratelimit-policy']).toBe('"api";q=4;w=300');
    }
    expect((await req('GET', '/api/v1/statuses/1', partner)).status).toBe(429);
    // Anyone else: the default limit, in the default bucket (untouched by the partner's four).
    const other = await req('GET', '/api/v1/statuses/1', '198.51.100.50');
    expect(other.headers['x-ratelimit-limit']).toBe('2');
    expect(other.headers['x-ratelimit-remaining']).toBe('1');
    // By key value: the trusted app gets 3, another app 1.
    const form = 'client_name=x&redirect_uris=urn:ietf:wg:oauth:2.0:oob';
    const post = (app: string, ip: string) =>
      req('POST', '/api/v1/apps', ip, { 'X-App-Id': app, 'Content-Type': 'application/x-www-form-urlencoded' }, form);
    for (let i = 0; i < 3; i++)
      expect((await post('trusted-app', `198.51.100.${60 + i}`)).headers['ratelimit-policy']).toContain(
        '"per-app";q=3;w=300',
      );
    expect((await post('trusted-app', '198.51.100.70')).status).toBe(429);
    expect((await post('other-app', '198.51.100.71')).status).toBe(200);
    expect((await post('other-app', '198.51.100.72')).status).toBe(429);
  });
});

describe('block', () => {
  it('answers a blocked IP 403 Forbidden before anything else, uncounted and unforwarded, and reloads live', async () => {
    const table = (ips: string) => `
block:
  ips: [${ips}]
limits:
  - { name: api, match: /api/*, per: ip, limit: 1, period: 5m }
`;
    const g = await gateway(table('203.0.113.0/24'));
    let forwarded = 0;
    const count = () => forwarded++;
    upstream.server.on('request', count);
    const blocked = await req(
      'POST',
      '/api/v1/accounts',
      '203.0.113.7',
      { 'Content-Type': 'application/x-www-form-urlencoded' },
      'username=x',
    );
    expect(blocked.status).toBe(403);
    expect(blocked.body).toBe('{"error":"Forbidden"}');
    expect(blocked.headers['x-ratelimit-limit']).toBeUndefined();
    // Unmatched paths too: the block is not a rule.
    expect((await req('GET', '/nothing/here', '203.0.113.8')).status).toBe(403);
    upstream.server.off('request', count);
    expect(forwarded).toBe(0);
    // Reload without the block: the IP's bucket was never charged, so its one request is still there.
    writeFileSync(g.configPath, table(''));
    await g.reload();
    expect((await req('GET', '/api/v1/statuses/1', '203.0.113.7')).status).toBe(404);
    expect((await req('GET', '/api/v1/statuses/1', '203.0.113.7')).status).toBe(429);
  });
});

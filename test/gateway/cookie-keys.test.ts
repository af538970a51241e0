/**
 * `per: cookie:NAME` (SPEC §3.2) through the real gateway: a rule keyed on a session cookie's value
 * (digested), which never makes a request "authenticated" and never lets a client out of a per-IP rule.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { explain } from '../../src/cli/explain.js';
import { FakeClock } from '../support/clock.js';
import { send } from '../support/http.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';

const TABLE = `
limits:
  - { name: session, match: "PUT /auth(.:format)", when: { authenticated: false }, per: "cookie:_mastodon_session", limit: 2, period: 10m }
  - { name: signed-in, match: "PUT /auth(.:format)", when: { authenticated: true }, per: account, limit: 5, period: 10m }
  - { name: per-ip, match: "PUT /auth(.:format)", per: ip, limit: 4, period: 5m }
`;

let upstream: RecordingUpstream;
let gw: TestGateway;
beforeAll(async () => {
  upstream = await startRecordingUpstream();
  gw = await startTestGateway(TABLE, { upstream: upstream.url, now: new FakeClock().now });
});
afterAll(async () => {
  await gw.shutdown(1000);
  await upstream.close();
});

function put(ip: string, headers: Record<string, string> = {}) {
  return send(gw.url, { method: 'PUT', path: '/auth', headers: { 'X-Forwarded-For': ip, ...headers } });
}

describe('per: cookie:NAME', () => {
  it('counts one session across IPs, by its value only (other cookies, order and %-escapes aside)', async () => {
    const sid = 'BAh7Bk%2Bsession--abc';
    expect((await put('198.51.100.1', { Cookie: `_mastodon_session=${sid}` })).status).toBe(200);
    // Another IP, another cookie around it, the same value escaped differently: the same session.
    const second = await put('198.51.100.2', {
      Cookie: `theme=dark; _mastodon_session=BAh7Bk%2bsession--abc; _mastodon_session=other`,
    });
    expect(second.status).toBe(200);
    expect(second.headers['x-ratelimit-remaining']).toBe('0');
    const third = await put('198.51.100.3', { Cookie: `_mastodon_session=${sid}` });
    expect(third.status).toBe(429);
    expect(third.headers['ratelimit-policy']).toContain('"session";q=2;w=600');
    // Cookie names are case-sensitive: another name is no session, and the rule is skipped.
    const other = await put('198.51.100.3', { Cookie: `_Mastodon_Session=${sid}` });
    expect(other.status).toBe(200);
    expect(other.headers['ratelimit-policy']).toBe('"per-ip";q=4;w=300');
  });

  it('never makes a request authenticated, and never lets a client out of its per-IP rule', async () => {
    const ip = '203.0.113.50';
    for (let i = 0; i < 4; i++) {
      // A fresh made-up cookie each time: a new session bucket, but still this IP's bucket.
      const a = await put(ip, { Cookie: `_mastodon_session=forged-${i}` });
      expect(a.status).toBe(200);
      // Not "authenticated": the signed-in rule does not apply, the session rule does.
      const policy = String(a.headers['ratelimit-policy']).split(', ').sort();
      expect(policy).toEqual(['"per-ip";q=4;w=300', '"session";q=2;w=600']);
    }
    const refused = await put(ip, { Cookie: '_mastodon_session=forged-new' });
    expect(refused.status).toBe(429);
    expect(refused.headers['x-ratelimit-limit']).toBe('4');
    // A bearer token the upstream knows is what authenticates: then the account rule, not the session one.
    const signedIn = await put('203.0.113.51', {
      Cookie: '_mastodon_session=forged-0',
      Authorization: 'Bearer user-77',
    });
    expect(signedIn.status).toBe(200);
    expect(String(signedIn.headers['ratelimit-policy']).split(', ').sort()).toEqual([
      '"per-ip";q=4;w=300',
      '"signed-in";q=5;w=600',
    ]);
    // Hostile cookie headers leave the process answering.
    const odd = await put('203.0.113.52', {
      Cookie: `_mastodon_session=%E0%A4%A; ;=;_mastodon_session;${'a'.repeat(4000)}`,
    });
    expect(odd.status).toBe(200);
    expect((await put('203.0.113.53')).status).toBe(200);
  });
});

describe('per: cookie:NAME overrides and the admin bucket API', () => {
  it('gives a session named in overrides.keys its own limit, and finds a session bucket by the cookie value', async () => {
    const own = await startTestGateway(
      `limits:
  - name: session
    match: PUT /auth
    per: "cookie:sid"
    limit: 1
    period: 10m
    overrides: [{ keys: [trusted-session], limit: 3 }]
`,
      { upstream: upstream.url, now: new FakeClock().now },
    );
    try {
      const put1 = (sid: string) =>
        send(own.url, {
          method: 'PUT',
          path: '/auth',
          headers: { 'X-Forwarded-For': '198.51.100.9', Cookie: `sid=${sid}` },
        });
      expect((await put1('plain')).status).toBe(200);
      expect((await put1('plain')).status).toBe(429);
      for (let i = 0; i < 3; i++) expect((await put1('trusted-session')).headers['x-ratelimit-limit']).toBe('3');
      expect((await put1('trusted-session')).status).toBe(429);
      const digest = createHash('sha256').update('plain').digest('hex');
      const bucket = await (await fetch(`${own.adminUrl}/admin/buckets?rule=session&key=plain`)).json();
      expect(bucket).toMatchObject({ key: `session:{ck:${digest}}`, remaining: 0 });
      // The admin API names the rule's key kind as written, and triage shows a session by its digest's prefix.
      const rules = (await (await fetch(`${own.adminUrl}/admin/buckets`)).json()) as { rules: { per: string }[] };
      expect(rules.rules.map((r) => r.per)).toEqual(['cookie:sid']);
      const limited = (await (await fetch(`${own.adminUrl}/admin/limited?rule=session`)).json()) as {
        top: { key: string }[];
      };
      expect(limited.top.map((k) => k.key)).toEqual([
        `cookie ${digest.slice(0, 16)}`,
        `cookie ${createHash('sha256').update('trusted-session').digest('hex').slice(0, 16)} (override 0)`,
      ]);
    } finally {
      await own.shutdown(1000);
    }
  });
});

describe('per: cookie:NAME in the config and in explain', () => {
  it('refuses a name that is not a cookie name, and names overrides keys for it', () => {
    expect(() =>
      parseConfig('limits: [{ name: a, match: /x, per: "cookie:bad name", limit: 1, period: 1m }]', 't.yaml'),
    ).toThrow(/invalid cookie name "bad name"/);
    expect(() =>
      parseConfig('limits: [{ name: a, match: /x, per: "cookie:", limit: 1, period: 1m }]', 't.yaml'),
    ).toThrow(/invalid cookie name/);
    const snap = parseConfig(
      'limits: [{ name: a, match: /x, per: "cookie:sid", limit: 1, period: 1m, overrides: [{ keys: [abc], limit: 5 }] }]',
      't.yaml',
    );
    expect(snap.rules[0]!.key.label).toBe('cookie:sid');
  });

  it('explain shows the cookie key, digested, or why the rule is skipped', async () => {
    const snap = parseConfig(TABLE, 't.yaml');
    const withCookie = await explain(snap, {
      request: 'PUT /auth.json',
      headers: ['Cookie: a=1; _mastodon_session=xyz'],
      ip: '203.0.113.9',
    });
    expect(withCookie.find((l) => l.includes('session:'))).toMatch(
      /1\. session: yes, per cookie:_mastodon_session \(unauthenticated\), 2\/10m, key: cookie _mastodon_session, digest [0-9a-f]{12}…$/,
    );
    const without = await explain(snap, { request: 'PUT /auth', headers: [], ip: '203.0.113.9' });
    expect(without).toContain('   1. session: no (no key: the request has no cookie _mastodon_session)');
  });
});

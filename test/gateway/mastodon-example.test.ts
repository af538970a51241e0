/**
 * config/examples/mastodon.yaml — all of Mastodon's rack-attack throttles — through the real gateway
 * in front of the built-in upstream (started by the gateway, `upstream: builtin`), with a fake clock.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/index.js';
import { FakeClock } from '../support/clock.js';
import { send, type Answer } from '../support/http.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { uncommentBlock, uncommentSection } from '../support/opt-in.js';
import { explain } from '../../src/cli/explain.js';

const EXAMPLE = fileURLToPath(new URL('../../config/examples/mastodon.yaml', import.meta.url));
const T0 = Date.UTC(2026, 10, 21, 19, 0, 0);
let gw: TestGateway;

beforeEach(async () => {
  const clock = new FakeClock(T0 + 60_000);
  gw = await startTestGateway(readFileSync(EXAMPLE, 'utf8'), { upstream: 'builtin', now: clock.now });
});
afterEach(async () => gw.shutdown(1000));

const FORM = { 'Content-Type': 'application/x-www-form-urlencoded' };
/** Signs `username` up through the gateway as a client would: an app, its client-credentials token, then POST /api/v1/accounts. */
async function signUpThrough(ip: string, username: string): Promise<Answer> {
  const app = (
    await req(
      'POST',
      '/api/v1/apps',
      ip,
      FORM,
      'client_name=t&redirect_uris=urn:ietf:wg:oauth:2.0:oob&scopes=read%20write',
    )
  ).json<{
    client_id: string;
    client_secret: string;
  }>();
  const grant = `grant_type=client_credentials&client_id=${app.client_id}&client_secret=${app.client_secret}&scope=read%20write`;
  const appToken = (await req('POST', '/oauth/token', ip, FORM, grant)).json<{ access_token: string }>().access_token;
  const fields = `username=${username}&email=${username}@example.com&password=correct%20horse%20battery&agreement=true&locale=en`;
  return req('POST', '/api/v1/accounts', ip, { ...FORM, Authorization: `Bearer ${appToken}` }, fields);
}

function req(
  method: string,
  path: string,
  ip: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<Answer> {
  return send(gw.url, {
    method,
    path,
    headers: { 'X-Forwarded-For': ip, ...headers },
    ...(body === undefined ? {} : { body }),
  });
}

describe('config/examples/mastodon.yaml', () => {
  it('is a valid table with one rule per rack-attack throttle, each named in a comment', async () => {
    const snap = await loadConfigFile(EXAMPLE);
    const text = readFileSync(EXAMPLE, 'utf8');
    for (const throttle of [
      'throttle_authenticated_api',
      'throttle_per_token_api',
      'throttle_unauthenticated_api',
      'throttle_api_media',
      'throttle_media_proxy',
      'throttle_api_sign_up',
      'throttle_authenticated_paging',
      'throttle_unauthenticated_paging',
      'throttle_api_delete',
      'throttle_sign_up_attempts/ip',
      'throttle_password_resets/ip',
      'throttle_password_resets/email',
      'throttle_email_confirmations/ip',
      'throttle_email_confirmations/email',
      'throttle_login_attempts/ip',
      'throttle_login_attempts/email',
      'throttle_password_change/account',
    ])
      expect(text).toContain(`# ${throttle}`);
    // 17 throttles; throttle_email_confirmations/email and throttle_password_change/account take two rules
    // each (web form and API; token and session), throttle_login_attempts/email three (the e-mail, the
    // two-factor step's session); and the two inbox rules rack-attack has no counterpart for.
    expect(snap.rules.length).toBe(22);
  });

  it('carries the inbox rules and bans on by default: per server and IP, per address, every inbox route with its format', async () => {
    const text = readFileSync(EXAMPLE, 'utf8');
    expect(text).toContain('mastodon/mastodon#21977');
    const snap = await loadConfigFile(EXAMPLE);
    const inboxes = ['POST /inbox(.:format)', 'POST /users/:name/inbox(.:format)', 'POST /actor/inbox(.:format)'];
    const inbox = snap.rules.find((r) => r.name === 'inbox-per-server')!;
    expect([inbox.key.label, inbox.key.missingIp, inbox.patterns]).toEqual(['[signature:domain, ip]', true, inboxes]);
    const address = snap.rules.find((r) => r.name === 'inbox-per-address')!;
    expect([address.key.label, address.patterns, address.limit > inbox.limit]).toEqual(['ip', inboxes, true]);
    expect(snap.config.bans.map((b) => [b.name, b.match, b.on?.status])).toEqual([
      ['bad-signatures', inboxes, [401]],
      ['bad-signatures-per-address', inboxes, [401]],
    ]);
  });

  it('carries the opt-in new-account rule and sign-up surge commented out, each valid once uncommented', async () => {
    const text = readFileSync(EXAMPLE, 'utf8');
    for (const issue of ['mastodon/mastodon#9766', 'mastodon/mastodon#25032', '#20315']) expect(text).toContain(issue);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-optin-'));
    writeFileSync(path.join(dir, 'limits.yaml'), uncommentSection(uncommentBlock(text, 'new-accounts-post'), 'surges'));
    const snap = await loadConfigFile(path.join(dir, 'limits.yaml'));
    expect(snap.rules.length).toBe(25);
    expect(snap.rules.find((r) => r.name === 'new-accounts-post')!.whenAccount).toMatchObject({
      age: { op: '<', ms: 7 * 86_400_000 },
    });
    expect(snap.config.surges.map((s) => [s.name, s.trigger.rule, s.for])).toEqual([
      ['sign-up-wave', 'api-sign-up', 6 * 3_600_000],
    ]);
    expect(snap.config.surges[0]!.trigger).toMatchObject({
      statuses: ['2xx'],
      perNetwork: 5,
      networkPrefix: { ipv4: 24, ipv6: 48 },
    });
    const young = (
      await explain(snap, {
        request: 'POST /api/v1/statuses',
        headers: ['Authorization: Bearer t'],
        ip: '203.0.113.5',
        accountAge: '2d',
      })
    ).join('\n');
    expect(young).toMatch(/new-accounts-post: yes, per account \(account: age < 7d\), 10\/1h/);
    const wave = (
      await explain(snap, { request: 'POST /api/v1/accounts', headers: [], ip: '203.0.113.5', surge: 'sign-up-wave' })
    ).join('\n');
    expect(wave).toMatch(/sign-up-surge-ip: yes, per ip \(surge sign-up-wave\), 1\/1d/);
    expect(wave).toMatch(/sign-up-surge-cap: yes, per global \(surge sign-up-wave\), 200\/1d/);
  });

  it('limits password resets to 5 per e-mail across IPs, at /auth/password and /auth/password.json', async () => {
    for (let i = 0; i < 5; i++) {
      const a = await req(
        'POST',
        `/auth/password${i % 2 ? '.json' : ''}?user[email]=victim@example.com`,
        `203.0.113.${i + 1}`,
      );
      expect(a.status).toBe(201);
      expect(a.headers['x-ratelimit-limit']).toBe('5');
    }
    const refused = await req('POST', '/auth/password.json?user[email]=victim@example.com', '203.0.113.77');
    expect(refused.status).toBe(429);
    expect(refused.headers['ratelimit-policy']).toBe(
      '"password-resets-email";q=5;w=1800, "password-resets-ip";q=25;w=300',
    );
  });

  it('limits login attempts per IP (25 / 5 min) with Devise answering the failures', async () => {
    const ip = '198.51.100.20';
    for (let i = 0; i < 25; i++) {
      const a = await req('POST', `/auth/sign_in.json?user[email]=u${i}@example.com`, ip);
      expect(a.status).toBe(401);
      expect(a.body).toBe('{"error":"Invalid Email or password."}');
    }
    const refused = await req('POST', '/auth/sign_in?user[email]=fresh@example.com', ip);
    expect(refused.status).toBe(429);
    expect(refused.headers['x-ratelimit-limit']).toBe('25');
  });

  it('counts the two-factor login step (a code, no e-mail) per session cookie across IPs, as Mastodon keys it on the pending user', async () => {
    const otp = (ip: string, cookie?: string) =>
      req(
        'POST',
        '/auth/sign_in',
        ip,
        { ...FORM, ...(cookie === undefined ? {} : { Cookie: `_mastodon_session=${cookie}` }) },
        'user%5Botp_attempt%5D=123456',
      );
    for (let i = 0; i < 25; i++) {
      const a = await otp(`203.0.113.${i + 100}`, 'pending-sign-in');
      expect(a.status).not.toBe(429);
      expect(String(a.headers['ratelimit-policy'])).toContain('"login-attempts-session";q=25;w=3600');
    }
    const refused = await otp('203.0.113.200', 'pending-sign-in');
    expect(refused.status).toBe(429);
    expect(refused.headers['x-ratelimit-limit']).toBe('25');
    // Another pending sign-in is another bucket; without a session cookie only the per-IP rule counts.
    expect((await otp('203.0.113.200', 'another-sign-in')).status).not.toBe(429);
    expect((await otp('203.0.113.201')).headers['ratelimit-policy']).toBe('"login-attempts-ip";q=25;w=300');
    // The first step, with an e-mail, is counted per e-mail, not per session.
    const first = await req(
      'POST',
      '/auth/sign_in',
      '203.0.113.202',
      { ...FORM, Cookie: '_mastodon_session=pending-sign-in' },
      'user%5Bemail%5D=a%40example.com',
    );
    expect(String(first.headers['ratelimit-policy'])).not.toContain('login-attempts-session');
  });

  it('counts unauthenticated API and paging per IP, and never the host itself (the safelist)', async () => {
    const ip = '198.51.100.30';
    const a = await req('GET', '/api/v1/statuses/1?max_id=9', ip);
    expect(a.status).toBe(404);
    expect(a.headers['ratelimit-policy']).toBe(
      '"unauthenticated-api";q=300;w=300, "unauthenticated-paging";q=300;w=900',
    );
    // From the gateway's own host (no X-Forwarded-For): exempt, as Mastodon safelists 127.0.0.1 and ::1.
    const local = await send(gw.url, { method: 'GET', path: '/api/v1/statuses/1?max_id=9' });
    expect(local.headers['x-ratelimit-limit']).toBeUndefined();
  });

  it('counts a signed-in user per account and per token, and not as unauthenticated', async () => {
    const ip = '198.51.100.40';
    const signUp = await signUpThrough(ip, 'alice');
    expect(signUp.status).toBe(200);
    const token = signUp.json<{ access_token: string }>().access_token;
    const me = await req('GET', '/api/v1/accounts/verify_credentials?since_id=1', ip, {
      Authorization: `Bearer ${token}`,
    });
    expect(me.status).toBe(200);
    expect(me.headers['ratelimit-policy']).toBe(
      '"per-token-api";q=300;w=300, "authenticated-paging";q=300;w=900, "authenticated-api";q=1500;w=300',
    );
  });

  it('counts the password change as Mastodon does: every authenticated PUT, PATCH /auth(.json), and a web session per cookie', async () => {
    const ip = '198.51.100.41';
    const signUp = await signUpThrough(ip, 'bob');
    const auth = { Authorization: `Bearer ${signUp.json<{ access_token: string }>().access_token}` };
    // Editing a status (PUT) and PATCH /auth.json spend one budget of 10 per account.
    for (let i = 0; i < 10; i++) {
      const a =
        i % 2
          ? await req('PATCH', '/auth.json', `203.0.113.${100 + i}`, { ...FORM, ...auth }, 'x=1')
          : await req('PUT', '/api/v1/statuses/1', ip, { ...FORM, ...auth }, 'status=x');
      expect(a.headers['ratelimit-policy']).toContain('"password-change-account";q=10;w=600');
    }
    expect((await req('PATCH', '/auth', '203.0.113.120', { ...FORM, ...auth }, 'x=1')).status).toBe(429);
    // The cookie-only password form: 10 per session, whatever the IP; the IP does not escape it.
    const cookie = { ...FORM, Cookie: '_mastodon_session=abc123' };
    for (let i = 0; i < 10; i++) {
      const a = await req('PUT', '/auth', `203.0.113.${130 + i}`, cookie, 'user%5Bpassword%5D=x');
      expect(a.headers['ratelimit-policy']).toBe('"password-change-session";q=10;w=600');
    }
    expect((await req('PUT', '/auth.json', '203.0.113.150', cookie, 'user%5Bpassword%5D=x')).status).toBe(429);
    // Another session is another bucket; no session and no token: not counted.
    expect(
      (await req('PUT', '/auth', '203.0.113.150', { ...FORM, Cookie: '_mastodon_session=other' }, 'x=1')).headers[
        'x-ratelimit-remaining'
      ],
    ).toBe('9');
    expect((await req('PUT', '/auth', '203.0.113.150', FORM, 'x=1')).headers['ratelimit-policy']).toBeUndefined();
  });
});

// Body parameters reach `param:` rules through the body peek (src/rails/param-stage.ts → read-params.ts).
describe('password resets per e-mail from the request body', () => {
  it('counts the e-mail of URL-encoded and JSON bodies in one bucket, across IPs, at /auth/password(.json)', async () => {
    const bodies = [
      { headers: FORM, body: 'user%5Bemail%5D=victim%40example.com' },
      { headers: { 'Content-Type': 'application/json' }, body: '{"user":{"email":"victim@example.com"}}' },
    ];
    for (let i = 0; i < 5; i++) {
      const b = bodies[i % 2]!;
      const a = await req(
        'POST',
        i % 2 ? '/auth/password.json' : '/auth/password',
        `203.0.113.${i + 1}`,
        b.headers,
        b.body,
      );
      expect(a.status).toBe(201);
      expect(a.headers['x-ratelimit-limit']).toBe('5');
    }
    const refused = await req(
      'POST',
      '/auth/password',
      '203.0.113.50',
      { 'Content-Type': 'application/json' },
      '{"user":{"email":" victim@example.com "}}',
    );
    expect(refused.status).toBe(429);
    // A multipart form field is read the same way.
    const boundary = 'XyZ';
    const multipart = `--${boundary}\r\nContent-Disposition: form-data; name="user[email]"\r\n\r\nvictim@example.com\r\n--${boundary}--\r\n`;
    const m = await req(
      'POST',
      '/auth/password.json',
      '203.0.113.51',
      { 'Content-Type': `multipart/form-data; boundary=${boundary}` },
      multipart,
    );
    expect(m.status).toBe(429);
  });

  it('forwards the body unchanged: the upstream reads the e-mail it was sent, and a login still works', async () => {
    const bad = await req(
      'POST',
      '/auth/sign_in.json',
      '203.0.113.60',
      { 'Content-Type': 'application/json' },
      '{"user":{"email":"nobody@example.com","password":"x"}}',
    );
    expect(bad.status).toBe(401);
    expect(bad.headers['ratelimit-policy']).toBe('"login-attempts-ip";q=25;w=300, "login-attempts-email";q=25;w=3600');
    // Without the e-mail Devise says so (422): the upstream got the body as sent, empty user hash and all.
    const none = await req('POST', '/auth/password', '203.0.113.61', FORM, 'user%5Bname%5D=x');
    expect(none.status).toBe(422);
  });

  it('answers 400 when the e-mail may lie beyond the peek bound or is given twice differently', async () => {
    const big = 'user%5Bemail%5D=a%40example.com&pad=' + 'x'.repeat(70 * 1024);
    const over = await req('POST', '/auth/password', '203.0.113.70', FORM, big);
    expect(over.status).toBe(400);
    const twice = await req(
      'POST',
      '/auth/password?user[email]=a@example.com',
      '203.0.113.71',
      FORM,
      'user%5Bemail%5D=b%40example.com',
    );
    expect(twice.status).toBe(400);
    expect(twice.body).toBe(
      '{"error":"Bad request: user[email] is given twice with different values","code":"PARAM_CONFLICT"}',
    );
  });
});

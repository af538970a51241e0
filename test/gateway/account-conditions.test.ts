/**
 * `when.account` through the real gateway and the built-in upstream (its verify_credentials carries
 * created_at, bot and locked): young and old accounts get their own limits, a bot its own, an anonymous
 * request never matches, and an account the upstream will not name (a write-only token: 403) counts as new.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startUpstream, type RunningUpstream } from '../../src/mastodon/index.js';
import { parseConfig } from '../../src/config/index.js';
import { explain } from '../../src/cli/explain.js';
import { call, newUser, registerApp } from '../mastodon/support.js';
import { send } from '../support/http.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

const DAY = 86_400_000;
let clock = Date.now();
let upstream: RunningUpstream;
let gw: TestGateway | undefined;

beforeAll(async () => {
  upstream = await startUpstream({ port: 0, now: () => clock });
});
afterAll(async () => {
  await gw?.shutdown(200);
  await upstream.close();
});

const TABLE = `
limits:
  - name: new-accounts-post
    match: POST /api/v1/statuses
    per: account
    limit: 2
    period: 1h
    when: { account: { age: "< 7d" } }
  - name: bots-post
    match: POST /api/v1/statuses
    per: account
    limit: 1
    period: 1h
    when: { account: { bot: true, age: ">= 30d" } }
  - name: anyone-posts
    match: POST /api/v1/statuses
    per: ip
    limit: 100
    period: 1h
`;

function post(
  token: string | null,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined> }> {
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
  if (token !== null) headers.authorization = `Bearer ${token}`;
  return send(gw!.url, { method: 'POST', path: '/api/v1/statuses', headers, body: 'status=hello' });
}

async function statuses(token: string | null, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await post(token)).status);
  return out;
}

describe('when.account through the gateway', () => {
  it('limits young accounts, leaves old ones alone, limits old bots, never matches without an account', async () => {
    clock = Date.now() - 60 * DAY;
    const old = await newUser(upstream.url);
    const oldBot = await newUser(upstream.url);
    clock = Date.now() - 2 * DAY;
    const young = await newUser(upstream.url);
    clock = Date.now();
    expect(
      (
        await call(upstream.url, 'PATCH', '/api/v1/accounts/update_credentials', {
          token: oldBot.token,
          form: { bot: 'true' },
        })
      ).body.bot,
    ).toBe(true);
    gw = await startTestGateway(TABLE, { upstream: upstream.url });

    expect(await statuses(young.token, 3)).toEqual([200, 200, 429]);
    const refused = await post(young.token);
    expect(refused.headers['ratelimit-policy']).toContain('"new-accounts-post";q=2;w=3600');
    expect(await statuses(old.token, 5)).toEqual([200, 200, 200, 200, 200]);
    expect(await statuses(oldBot.token, 2)).toEqual([200, 429]);
    // No account: the account rules never apply (the built-in upstream answers 401 to the post itself).
    expect((await statuses(null, 4)).every((s) => s !== 429)).toBe(true);
    // The gateway is alive and answers.
    expect((await fetch(`${gw.adminUrl}/readyz`)).status).toBe(200);
  });

  it('counts an account whose age the upstream will not tell (a write-only token, 403) as new', async () => {
    clock = Date.now() - 90 * DAY;
    const app = await registerApp(upstream.url, 'write');
    const grant = {
      grant_type: 'client_credentials',
      client_id: app.client_id,
      client_secret: app.client_secret,
      scope: 'write',
    };
    const appOnly = (await call(upstream.url, 'POST', '/oauth/token', { form: grant })).body.access_token as string;
    // The new user's token carries the app's scopes: write only.
    const writer = await newUser(upstream.url, appOnly);
    clock = Date.now();
    expect(
      (await call(upstream.url, 'GET', '/api/v1/accounts/verify_credentials', { token: writer.token })).status,
    ).toBe(403);
    await gw?.shutdown(200);
    gw = await startTestGateway(TABLE, { upstream: upstream.url });
    expect(await statuses(writer.token, 3)).toEqual([200, 200, 429]);
  });
});

describe('rategate explain --account-age --bot --locked', () => {
  it('shows which account conditions hold', async () => {
    const snapshot = parseConfig(TABLE, 'limits.yaml');
    const req = {
      request: 'POST /api/v1/statuses',
      headers: ['Authorization: Bearer abc'],
      ip: '203.0.113.9',
      body: 'status=hi',
    };
    const young = (await explain(snapshot, { ...req, accountAge: '3d' })).join('\n');
    expect(young).toMatch(/account: account token-owner, 3d old/);
    expect(young).toMatch(/new-accounts-post: yes, per account/);
    expect(young).toMatch(/bots-post: no \(when\.account\.age: the account is 3d old, not >= 30d\)/);
    const oldBot = (await explain(snapshot, { ...req, accountAge: '45d', bot: true, locked: true })).join('\n');
    expect(oldBot).toMatch(/45d old, a bot, locked/);
    expect(oldBot).toMatch(/new-accounts-post: no \(when\.account\.age: the account is 45d old, not < 7d\)/);
    expect(oldBot).toMatch(/bots-post: yes/);
    const unknown = (await explain(snapshot, req)).join('\n');
    expect(unknown).toMatch(/of unknown age \(counted as new\)/);
    expect(unknown).toMatch(/new-accounts-post: yes/);
    const anonymous = (await explain(snapshot, { ...req, account: null })).join('\n');
    expect(anonymous).toMatch(/new-accounts-post: no \(when\.account: the request has no account\)/);
  });
});

describe('config checks', () => {
  it('refuses a malformed age and when.account without introspection, with their place', () => {
    expect(() => parseConfig(TABLE.replace('"< 7d"', '"7d"'), 'limits.yaml')).toThrow(
      /limits\[0\]\.when\.account\.age: invalid age "7d"/,
    );
    expect(() => parseConfig(TABLE.replace('age: "< 7d"', 'young: true'), 'limits.yaml')).toThrow(
      /limits\[0\]\.when\.account/,
    );
    expect(() => parseConfig(`clients: { account: { from: token } }\n${TABLE}`, 'limits.yaml')).toThrow(
      /limits\[0\]\.when\.account: needs clients\.account\.from: introspect/,
    );
    const surge = `clients: { account: { from: header, header: X-Account } }
limits: [{ name: posts, match: /x, per: ip, limit: 5, period: 1m }]
surges: [{ name: w, trigger: { rule: posts, above: 5, within: 1m }, for: 1h, limits: [{ name: w1, match: /x, per: account, limit: 1, period: 1m, when: { account: { bot: true } } }] }]
`;
    expect(() => parseConfig(surge, 'limits.yaml')).toThrow(
      /surges\[0\]\.limits\[0\]\.when\.account: needs clients\.account\.from: introspect \(.*from is "header"\)/,
    );
  });
});

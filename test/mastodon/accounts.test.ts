/** @module Sign-up with Mastodon's per-field error codes, and verify_credentials. */
import { beforeAll, describe, expect, it } from 'vitest';
import { appToken, call, newUser, useUpstream } from './support.js';

const server = useUpstream();
let app = '';
let seq = 0;

beforeAll(async () => {
  app = await appToken(server.url);
});

/** Valid sign-up fields with a fresh username and e-mail, overridable per test. */
function fields(overrides: Record<string, string> = {}): Record<string, string> {
  seq += 1;
  return {
    username: `signup_${seq}`,
    email: `signup_${seq}@example.com`,
    password: 'long enough secret',
    agreement: 'true',
    locale: 'en',
    ...overrides,
  };
}

async function signUp(body: Record<string, string>): Promise<Awaited<ReturnType<typeof call>>> {
  return call(server.url, 'POST', '/api/v1/accounts', { token: app, form: body });
}

function codes(body: { details?: Record<string, Array<{ error: string }>> }, field: string): string[] {
  return (body.details?.[field] ?? []).map((d) => d.error);
}

describe('POST /api/v1/accounts', () => {
  it('signs up with an app token and returns a working user token', async () => {
    const body = fields({ reason: 'hello' });
    const res = await signUp(body);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ token_type: 'Bearer', scope: 'read write follow push' });
    expect(typeof res.body.created_at).toBe('number');
    const me = await call(server.url, 'GET', '/api/v1/accounts/verify_credentials', {
      token: res.body.access_token as string,
    });
    expect(me.status).toBe(200);
    expect(me.body.username).toBe(body['username']);
  });

  it('takes the same fields as JSON, multipart or a query string', async () => {
    const json = fields();
    expect(
      (await call(server.url, 'POST', '/api/v1/accounts', { token: app, json: { ...json, agreement: true } })).status,
    ).toBe(200);
    const multipart = new FormData();
    for (const [k, v] of Object.entries(fields())) multipart.append(k, v);
    expect((await call(server.url, 'POST', '/api/v1/accounts', { token: app, multipart })).status).toBe(200);
    const query = new URLSearchParams(fields());
    expect((await call(server.url, 'POST', '/api/v1/accounts', { token: app, query })).status).toBe(200);
  });

  it('answers 401 without a token or with an unknown one', async () => {
    const none = await call(server.url, 'POST', '/api/v1/accounts', { form: fields() });
    expect(none.status).toBe(401);
    expect(none.body).toEqual({ error: 'The access token is invalid' });
    const bad = await call(server.url, 'POST', '/api/v1/accounts', { token: 'not-a-token', form: fields() });
    expect(bad.status).toBe(401);
  });

  it('reports every blank field with ERR_BLANK and a Validation failed message', async () => {
    const res = await signUp({ agreement: 'true' });
    expect(res.status).toBe(422);
    expect(res.body.error).toMatch(/^Validation failed: /);
    expect(codes(res.body, 'username')).toEqual(['ERR_BLANK']);
    expect(codes(res.body, 'email')).toEqual(['ERR_BLANK']);
    expect(codes(res.body, 'password')).toEqual(['ERR_BLANK']);
    expect(res.body.details.username[0].description).toBe("can't be blank");
  });

  it('reports a username outside [a-z0-9_] and a malformed e-mail with ERR_INVALID', async () => {
    const res = await signUp(fields({ username: 'no-dashes!', email: 'not-an-email' }));
    expect(res.status).toBe(422);
    expect(codes(res.body, 'username')).toEqual(['ERR_INVALID']);
    expect(codes(res.body, 'email')).toEqual(['ERR_INVALID']);
  });

  it('reports a hash where text belongs as ERR_INVALID for that field', async () => {
    const res = await call(server.url, 'POST', '/api/v1/accounts', {
      token: app,
      json: { ...fields(), agreement: true, username: { nested: 'x' } },
    });
    expect(res.status).toBe(422);
    expect(codes(res.body, 'username')).toEqual(['ERR_INVALID']);
  });

  it('reports a taken username regardless of case, and a taken e-mail, with ERR_TAKEN', async () => {
    const first = fields();
    expect((await signUp(first)).status).toBe(200);
    const again = await signUp(
      fields({ username: first['username']!.toUpperCase(), email: first['email']!.toUpperCase() }),
    );
    expect(again.status).toBe(422);
    expect(codes(again.body, 'username')).toEqual(['ERR_TAKEN']);
    expect(codes(again.body, 'email')).toEqual(['ERR_TAKEN']);
  });

  it('reports reserved usernames with ERR_RESERVED', async () => {
    for (const username of ['admin', 'Root']) {
      const res = await signUp(fields({ username }));
      expect(res.status).toBe(422);
      expect(codes(res.body, 'username')).toEqual(['ERR_RESERVED']);
    }
  });

  it('reports an agreement that is false, "0", empty or missing with ERR_ACCEPTED', async () => {
    for (const agreement of ['false', '0', 'off', '']) {
      const res = await signUp(fields({ agreement }));
      expect(res.status).toBe(422);
      expect(codes(res.body, 'agreement')).toEqual(['ERR_ACCEPTED']);
    }
    const { agreement: _omitted, ...rest } = fields();
    expect(codes((await signUp(rest)).body, 'agreement')).toEqual(['ERR_ACCEPTED']);
    const jsonFalse = await call(server.url, 'POST', '/api/v1/accounts', {
      token: app,
      json: { ...fields(), agreement: false },
    });
    expect(codes(jsonFalse.body, 'agreement')).toEqual(['ERR_ACCEPTED']);
  });

  it('reports a username over 30 characters with ERR_TOO_LONG and a password under 8 with ERR_TOO_SHORT', async () => {
    const res = await signUp(fields({ username: 'a'.repeat(31), password: 'short' }));
    expect(res.status).toBe(422);
    expect(codes(res.body, 'username')).toEqual(['ERR_TOO_LONG']);
    expect(codes(res.body, 'password')).toEqual(['ERR_TOO_SHORT']);
    expect(res.body.details.password[0].description).toBe('is too short (minimum is 8 characters)');
  });

  it('reports an unknown locale with ERR_INCLUSION', async () => {
    const res = await signUp(fields({ locale: 'xx-NOPE' }));
    expect(res.status).toBe(422);
    expect(codes(res.body, 'locale')).toEqual(['ERR_INCLUSION']);
  });

  it('creates nothing when validation fails', async () => {
    const body = fields({ password: 'short' });
    expect((await signUp(body)).status).toBe(422);
    expect((await signUp({ ...body, password: 'long enough now' })).status).toBe(200);
  });
});

describe('GET /api/v1/accounts/verify_credentials', () => {
  it("returns the token owner's Account with source", async () => {
    const user = await newUser(server.url, app);
    const res = await call(server.url, 'GET', '/api/v1/accounts/verify_credentials', { token: user.token });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      username: user.username,
      acct: user.username,
      locked: false,
      bot: false,
      statuses_count: 0,
      followers_count: 0,
      following_count: 0,
      fields: [],
      emojis: [],
      source: { privacy: 'public', sensitive: false, language: 'en' },
    });
    expect(res.body.id).toMatch(/^\d+$/);
    expect(res.body.url).toBe(`http://localhost/@${user.username}`);
    expect(res.body.created_at).toMatch(/^\d{4}-\d\d-\d\dT00:00:00\.000Z$/);
  });

  it('answers 401 without a token and with a bad one', async () => {
    const none = await call(server.url, 'GET', '/api/v1/accounts/verify_credentials');
    expect(none.status).toBe(401);
    expect(none.body).toEqual({ error: 'The access token is invalid' });
    const bad = await call(server.url, 'GET', '/api/v1/accounts/verify_credentials', {
      headers: { authorization: 'Bearer nope' },
    });
    expect(bad.status).toBe(401);
    const notBearer = await call(server.url, 'GET', '/api/v1/accounts/verify_credentials', {
      headers: { authorization: app },
    });
    expect(notBearer.status).toBe(401);
  });

  it("answers 422 for an app token, with Mastodon's text", async () => {
    const res = await call(server.url, 'GET', '/api/v1/accounts/verify_credentials', { token: app });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ error: 'This method requires an authenticated user' });
  });

  it('accepts the scheme in any case', async () => {
    const user = await newUser(server.url, app);
    const res = await call(server.url, 'GET', '/api/v1/accounts/verify_credentials', {
      headers: { authorization: `bearer ${user.token}` },
    });
    expect(res.status).toBe(200);
  });
});

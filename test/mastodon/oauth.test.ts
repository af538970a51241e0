/** @module App registration and the OAuth token endpoint of the built-in upstream. */
import { describe, expect, it } from 'vitest';
import { call, newUser, registerApp, useUpstream } from './support.js';

const server = useUpstream();

describe('POST /api/v1/apps', () => {
  it('registers an app and returns its client id and secret', async () => {
    const res = await call(server.url, 'POST', '/api/v1/apps', {
      form: {
        client_name: 'Tusky',
        redirect_uris: 'urn:ietf:wg:oauth:2.0:oob',
        scopes: 'read write',
        website: 'https://tusky.app',
      },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toMatchObject({
      name: 'Tusky',
      website: 'https://tusky.app',
      scopes: ['read', 'write'],
      redirect_uris: ['urn:ietf:wg:oauth:2.0:oob'],
    });
    expect(res.body.id).toMatch(/^\d+$/);
    expect(res.body.client_id).toMatch(/^[\w-]{43}$/);
    expect(res.body.client_secret).toMatch(/^[\w-]{43}$/);
  });

  it('accepts JSON with redirect_uris as an array', async () => {
    const res = await call(server.url, 'POST', '/api/v1/apps', {
      json: { client_name: 'json app', redirect_uris: ['https://a.example/cb', 'https://b.example/cb'] },
    });
    expect(res.status).toBe(200);
    expect(res.body.redirect_uris).toEqual(['https://a.example/cb', 'https://b.example/cb']);
    expect(res.body.scopes).toEqual(['read']);
  });

  it('answers 422 when client_name or redirect_uris is missing', async () => {
    const noName = await call(server.url, 'POST', '/api/v1/apps', {
      form: { redirect_uris: 'urn:ietf:wg:oauth:2.0:oob' },
    });
    expect(noName.status).toBe(422);
    expect(noName.body.error).toBe("Validation failed: Application name can't be blank");
    const noUris = await call(server.url, 'POST', '/api/v1/apps', { form: { client_name: 'x' } });
    expect(noUris.status).toBe(422);
    expect(noUris.body.error).toBe("Validation failed: Redirect URI can't be blank");
  });

  it('answers 422 for a relative redirect URI or an unknown scope', async () => {
    const relative = await call(server.url, 'POST', '/api/v1/apps', {
      form: { client_name: 'x', redirect_uris: '/callback' },
    });
    expect(relative.status).toBe(422);
    const scope = await call(server.url, 'POST', '/api/v1/apps', {
      form: { client_name: 'x', redirect_uris: 'urn:ietf:wg:oauth:2.0:oob', scopes: 'read everything' },
    });
    expect(scope.status).toBe(422);
    expect(scope.body.error).toMatch(/Scopes/);
  });
});

describe('POST /oauth/token', () => {
  it('issues an app token for client credentials, with no owner', async () => {
    const app = await registerApp(server.url);
    const res = await call(server.url, 'POST', '/oauth/token', {
      form: {
        grant_type: 'client_credentials',
        client_id: app.client_id,
        client_secret: app.client_secret,
        scope: 'read write',
      },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ token_type: 'Bearer', scope: 'read write' });
    expect(typeof res.body.created_at).toBe('number');
    expect(Math.abs(res.body.created_at - Date.now() / 1000)).toBeLessThan(60);
    const me = await call(server.url, 'GET', '/api/v1/accounts/verify_credentials', { token: res.body.access_token });
    expect(me.status).toBe(422);
  });

  it('grants the default read scope when none is asked for', async () => {
    const app = await registerApp(server.url);
    const res = await call(server.url, 'POST', '/oauth/token', {
      json: { grant_type: 'client_credentials', client_id: app.client_id, client_secret: app.client_secret },
    });
    expect(res.status).toBe(200);
    expect(res.body.scope).toBe('read');
  });

  it('accepts client credentials in HTTP Basic auth', async () => {
    const app = await registerApp(server.url);
    const basic = Buffer.from(`${app.client_id}:${app.client_secret}`).toString('base64');
    const res = await call(server.url, 'POST', '/oauth/token', {
      headers: { authorization: `Basic ${basic}` },
      form: { grant_type: 'client_credentials' },
    });
    expect(res.status).toBe(200);
  });

  it('issues user tokens for the password grant with the e-mail as username, several per account', async () => {
    const app = await registerApp(server.url);
    const user = await newUser(server.url);
    const grant = {
      grant_type: 'password',
      client_id: app.client_id,
      client_secret: app.client_secret,
      password: user.password,
    };
    const first = await call(server.url, 'POST', '/oauth/token', { form: { ...grant, username: user.email } });
    const second = await call(server.url, 'POST', '/oauth/token', {
      json: { ...grant, username: user.email.toUpperCase() },
    });
    expect(first.status).toBe(200);
    expect(second.status).toBe(200);
    expect(first.body.access_token).not.toBe(second.body.access_token);
    for (const token of [first.body.access_token, second.body.access_token, user.token]) {
      const me = await call(server.url, 'GET', '/api/v1/accounts/verify_credentials', { token: token as string });
      expect(me.status).toBe(200);
      expect(me.body.username).toBe(user.username);
    }
  });

  it('answers 400 invalid_grant for a wrong password or an unknown e-mail', async () => {
    const app = await registerApp(server.url);
    const user = await newUser(server.url);
    const grant = { grant_type: 'password', client_id: app.client_id, client_secret: app.client_secret };
    const wrong = await call(server.url, 'POST', '/oauth/token', {
      form: { ...grant, username: user.email, password: 'nope nope' },
    });
    const unknown = await call(server.url, 'POST', '/oauth/token', {
      form: { ...grant, username: 'nobody@example.com', password: 'x' },
    });
    for (const res of [wrong, unknown]) {
      expect(res.status).toBe(400);
      expect(res.body.error).toBe('invalid_grant');
      expect(typeof res.body.error_description).toBe('string');
    }
  });

  it('answers 401 invalid_client for an unknown client or a wrong secret', async () => {
    const app = await registerApp(server.url);
    const wrongSecret = await call(server.url, 'POST', '/oauth/token', {
      form: { grant_type: 'client_credentials', client_id: app.client_id, client_secret: 'x' },
    });
    const unknown = await call(server.url, 'POST', '/oauth/token', {
      form: { grant_type: 'client_credentials', client_id: 'nope', client_secret: 'x' },
    });
    const none = await call(server.url, 'POST', '/oauth/token', { form: { grant_type: 'client_credentials' } });
    for (const res of [wrongSecret, unknown, none]) {
      expect(res.status).toBe(401);
      expect(res.body.error).toBe('invalid_client');
      expect(res.body.error_description).toMatch(/Client authentication failed/);
    }
  });

  it('answers 400 for a missing or unsupported grant type and for a scope the app lacks', async () => {
    const app = await registerApp(server.url, 'read');
    const creds = { client_id: app.client_id, client_secret: app.client_secret };
    const missing = await call(server.url, 'POST', '/oauth/token', { form: creds });
    expect(missing.status).toBe(400);
    expect(missing.body.error).toBe('invalid_request');
    const unsupported = await call(server.url, 'POST', '/oauth/token', { form: { ...creds, grant_type: 'implicit' } });
    expect(unsupported.status).toBe(400);
    expect(unsupported.body.error).toBe('unsupported_grant_type');
    const scope = await call(server.url, 'POST', '/oauth/token', {
      form: { ...creds, grant_type: 'client_credentials', scope: 'write' },
    });
    expect(scope.status).toBe(400);
    expect(scope.body.error).toBe('invalid_scope');
  });

  it('grants a granular scope under a scope the app holds', async () => {
    const app = await registerApp(server.url, 'read write');
    const res = await call(server.url, 'POST', '/oauth/token', {
      form: {
        grant_type: 'client_credentials',
        client_id: app.client_id,
        client_secret: app.client_secret,
        scope: 'write:accounts',
      },
    });
    expect(res.status).toBe(200);
    expect(res.body.scope).toBe('write:accounts');
  });
});

import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpIntrospector } from '../../src/identity/introspect.js';
import { refusedOrigin, startIntrospectionServer, type IntrospectionServer } from './introspection-server.js';

const PATH = '/api/v1/accounts/verify_credentials';

describe('createHttpIntrospector against a real HTTP server', () => {
  let server: IntrospectionServer;
  let pool: Pool;
  let introspect: ReturnType<typeof createHttpIntrospector>;

  beforeAll(async () => {
    server = await startIntrospectionServer();
    pool = new Pool(server.origin, { connections: 4 });
    introspect = createHttpIntrospector({ dispatcher: pool, origin: server.origin, path: PATH, timeoutMs: 300 });
  });
  afterAll(async () => {
    await pool.destroy();
    await server.close();
  });

  it('sends GET to the path with the bearer token and Accept: application/json', async () => {
    await introspect('user-7');
    const req = server.requests.at(-1)!;
    expect(req.method).toBe('GET');
    expect(req.url).toBe(PATH);
    expect(req.headers.authorization).toBe('Bearer user-7');
    expect(req.headers.accept).toBe('application/json');
  });

  it('reads the account id of a 200 answer', async () => {
    expect(await introspect('user-109348')).toEqual({ kind: 'account', id: '109348' });
  });

  it('accepts a numeric id in its decimal form', async () => {
    expect(await introspect('num-42')).toEqual({ kind: 'account', id: '42' });
  });

  it('treats 401 and 422 as an anonymous token', async () => {
    for (const t of ['app', 'unprocessable']) {
      expect(await introspect(t), t).toEqual({ kind: 'anonymous' });
    }
  });

  it('treats 403 (a token without a read scope) as a token to key by its digest, not as anonymous', async () => {
    expect(await introspect('forbidden')).toEqual({ kind: 'token' });
  });

  it('treats other statuses and unusable 200 bodies as an error', async () => {
    for (const t of ['boom', 'missing', 'badjson', 'noid', 'big']) {
      expect(await introspect(t), t).toEqual({ kind: 'error' });
    }
  });

  it('gives up with an error when the upstream does not answer in time', async () => {
    const started = Date.now();
    expect(await introspect('slow')).toEqual({ kind: 'error' });
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('keeps working after drained error answers', async () => {
    for (let i = 0; i < 10; i++) await introspect('app');
    expect(await introspect('user-1')).toEqual({ kind: 'account', id: '1' });
  });

  it('answers an error when the connection is refused', async () => {
    const origin = await refusedOrigin();
    const refused = new Pool(origin);
    try {
      const i = createHttpIntrospector({ dispatcher: refused, origin, path: PATH, timeoutMs: 1_000 });
      expect(await i('user-1')).toEqual({ kind: 'error' });
    } finally {
      await refused.destroy();
    }
  });
});

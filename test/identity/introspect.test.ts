import { Pool } from 'undici';
import { describe, expect, it } from 'vitest';
import { createHttpIntrospector } from '../../src/identity/introspect.js';
import { introspectionFixture, refusedOrigin } from './introspection-server.js';

const PATH = '/api/v1/accounts/verify_credentials';

describe('createHttpIntrospector against a real HTTP server', () => {
  const fx = introspectionFixture(4);
  const { introspect } = fx;

  it('sends GET to the path with the bearer token and Accept: application/json', async () => {
    await introspect('user-7');
    const req = fx.server.requests.at(-1)!;
    expect(req.method).toBe('GET');
    expect(req.url).toBe(PATH);
    expect(req.headers.authorization).toBe('Bearer user-7');
    expect(req.headers.accept).toBe('application/json');
  });

  it('reads the account id of a 200 answer', async () => {
    expect(await introspect('user-109348')).toEqual({
      kind: 'account',
      id: '109348',
      facts: { createdAt: null, bot: null, locked: null },
    });
  });

  it('accepts a numeric id in its decimal form', async () => {
    expect(await introspect('num-42')).toMatchObject({ kind: 'account', id: '42' });
  });

  it('treats 401 and 422 as an anonymous token', async () => {
    for (const t of ['app', 'unprocessable']) {
      expect(await introspect(t), t).toEqual({ kind: 'anonymous' });
    }
  });

  it('treats 403 (a token without a read scope) as a token to key by its digest, not as anonymous', async () => {
    expect(await introspect('forbidden')).toEqual({ kind: 'token' });
  });

  it('treats any other 4xx (404; a junk token too large for the upstream head: 431 or 400) as an anonymous token', async () => {
    expect(await introspect('missing')).toEqual({ kind: 'anonymous' });
  });

  it('does not call the upstream for a token outside Doorkeeper’s character set or over 4096 characters: anonymous', async () => {
    const before = fx.server.total();
    for (const t of ['€1', 'a\u0000b', 'a b', 'a\r\nX-Injected: 1', 'x'.repeat(4097), 'abc=def', '']) {
      expect(await introspect(t), JSON.stringify(t.slice(0, 20))).toEqual({ kind: 'anonymous' });
    }
    expect(fx.server.total()).toBe(before);
    // The RFC 6750 b64token set is asked about.
    expect(await introspect('user-Ab9-._~+/==')).toMatchObject({ kind: 'account', id: 'Ab9-._~+/==' });
  });

  it('meets its deadline even while every connection of its pool is busy, and the pool recovers', async () => {
    const small = new Pool(fx.server.origin, { connections: 1 });
    try {
      const i = createHttpIntrospector({ dispatcher: small, origin: fx.server.origin, path: PATH, timeoutMs: 300 });
      const started = Date.now();
      // One never-answered call holds the only connection; the next waits in the queue.
      expect(await Promise.all([i('slow'), i('user-3')])).toEqual([{ kind: 'error' }, { kind: 'error' }]);
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(await i('user-4')).toMatchObject({ kind: 'account', id: '4' });
    } finally {
      await small.destroy();
    }
  });

  it('treats other statuses and unusable 200 bodies as an error', async () => {
    for (const t of ['boom', 'badjson', 'noid', 'big']) {
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
    expect(await introspect('user-1')).toMatchObject({ kind: 'account', id: '1' });
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

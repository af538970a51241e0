import { createHash } from 'node:crypto';
import { Pool } from 'undici';
import { describe, expect, it } from 'vitest';
import {
  accountKeyFromHeader,
  createAccountResolver,
  type AccountKey,
  type Introspect,
} from '../../src/identity/account.js';
import { createHttpIntrospector } from '../../src/identity/introspect.js';
import { introspectionFixture, refusedOrigin } from './introspection-server.js';

const sha = (s: string): string => createHash('sha256').update(s).digest('hex');
const PATH = '/api/v1/accounts/verify_credentials';

describe('account from the token', () => {
  const r = createAccountResolver({ from: 'token' });

  it('keys on the SHA-256 digest of the token, synchronously', () => {
    expect(r.resolve('secret-token', undefined, false)).toBe(`t:${sha('secret-token')}`);
  });

  it('gives different tokens different keys and no token no account', () => {
    expect(r.resolve('a', undefined, false)).not.toBe(r.resolve('b', undefined, false));
    expect(r.resolve(null, undefined, false)).toBeNull();
    expect(r.resolve(null, undefined, true)).toBeNull();
  });

  it('never puts the token itself in a key', () => {
    const key = r.resolve('s3cr3t-t0ken-value', undefined, false);
    expect(key).not.toContain('s3cr3t');
  });
});

describe('account from a header set by a trusted proxy', () => {
  const r = createAccountResolver({ from: 'header', header: 'X-Account-Id' });

  it('reads the header a trusted proxy set', () => {
    expect(r.header).toBe('x-account-id');
    expect(r.resolve(null, '12345', true)).toBe('h:12345');
  });

  it('a client cannot choose its account by sending X-Account-Id directly', () => {
    expect(r.resolve(null, 'victim', false)).toBeNull();
    expect(r.resolve('tok', 'victim', false)).toBeNull();
  });

  it('ignores empty and oversized values', () => {
    expect(r.resolve(null, '', true)).toBeNull();
    expect(r.resolve(null, 'x'.repeat(257), true)).toBeNull();
    expect(r.resolve(null, 'x'.repeat(256), true)).toBe(`h:${'x'.repeat(256)}`);
  });

  it('a header value cannot break out of the store key’s hash tag', () => {
    const key = accountKeyFromHeader('a}b{c d');
    expect(key).toBe('h:a%7Db%7Bc%20d');
    expect(key).not.toMatch(/[{} ]/);
  });

  it('rejects an invalid header name at construction', () => {
    expect(() => createAccountResolver({ from: 'header', header: 'X Bad' })).toThrow(/X Bad/);
  });
});

describe('account by introspection (resolver logic)', () => {
  it('introspection errors thrown synchronously fall back to the digest key and are retried', async () => {
    let calls = 0;
    const introspect: Introspect = () => {
      calls++;
      throw new Error('sync failure');
    };
    const r = createAccountResolver({ from: 'introspect', introspect, cacheTtlMs: 60_000 });
    expect(await r.resolve('x', undefined, false)).toBe(`t:${sha('x')}`);
    expect(await r.resolve('x', undefined, false)).toBe(`t:${sha('x')}`);
    expect(calls).toBe(2);
  });

  it('a rejected introspection falls back to the digest key', async () => {
    const r = createAccountResolver({
      from: 'introspect',
      introspect: () => Promise.reject(new Error('x')),
      cacheTtlMs: 1,
    });
    expect(await r.resolve('y', undefined, false)).toBe(`t:${sha('y')}`);
  });

  it('an id that cannot be a key is treated like an error', async () => {
    const r = createAccountResolver({
      from: 'introspect',
      introspect: () => Promise.resolve({ kind: 'account', id: 'z'.repeat(1000) }),
      cacheTtlMs: 60_000,
    });
    expect(await r.resolve('q', undefined, false)).toBe(`t:${sha('q')}`);
  });

  it('keys a token the upstream will not introspect (403) by its digest, and remembers that answer', async () => {
    let calls = 0;
    const r = createAccountResolver({
      from: 'introspect',
      introspect: () => (calls++, Promise.resolve({ kind: 'token' })),
      cacheTtlMs: 60_000,
    });
    expect(await r.resolve('w', undefined, false)).toBe(`t:${sha('w')}`);
    expect(r.resolve('w', undefined, false)).toBe(`t:${sha('w')}`);
    expect(calls).toBe(1);
  });

  it('resolves a token found outside the Authorization header (resolveToken) like one inside it', async () => {
    const r = createAccountResolver({
      from: 'introspect',
      introspect: (t) => Promise.resolve({ kind: 'account', id: t.slice(5) }),
      cacheTtlMs: 60_000,
    });
    expect(await r.resolve('user-77', undefined, false)).toBe('a:77');
    expect(r.resolve(null, undefined, false)).toBeNull();
    const byToken = createAccountResolver({ from: 'token' });
    expect(byToken.resolve('abc', undefined, false)).toBe(`t:${sha('abc')}`);
  });

  it('a token outside Doorkeeper’s character set is no account, known without asking (issue 18)', () => {
    let calls = 0;
    const r = createAccountResolver({
      from: 'introspect',
      introspect: () => (calls++, Promise.resolve({ kind: 'account', id: '1' })),
      cacheTtlMs: 60_000,
    });
    for (const t of ['€1', 'tok\u0001en', 'a b', 'x'.repeat(4097)]) {
      expect(r.known(t, undefined, false)).toBeNull();
      expect(r.resolve(t, undefined, false)).toBeNull();
    }
    expect(calls).toBe(0);
  });

  it('ignores the account header and the peer in introspect mode', async () => {
    const r = createAccountResolver({
      from: 'introspect',
      introspect: () => Promise.resolve({ kind: 'account', id: '5' }),
      cacheTtlMs: 1000,
    });
    expect(await r.resolve(null, '99', true)).toBeNull();
    expect(await r.resolve('t', '99', true)).toBe('a:5');
  });
});

describe('invalid answers (issue 37)', () => {
  let clock = 1_000_000;
  const now = (): number => clock;
  const calls = new Map<string, number>();
  // Pure logic: `user-<id>` owns account <id>, anything else is invalid.
  const introspect: Introspect = (t) => {
    calls.set(t, (calls.get(t) ?? 0) + 1);
    return Promise.resolve(t.startsWith('user-') ? { kind: 'account', id: t.slice(5) } : { kind: 'anonymous' });
  };

  it('are believed for invalidTtlMs, never longer than cacheTtlMs', async () => {
    const r = createAccountResolver({ from: 'introspect', introspect, cacheTtlMs: 300_000, invalidTtlMs: 5_000, now });
    expect(await r.resolve('junk-a', undefined, false)).toBeNull();
    clock += 4_999;
    expect(r.known('junk-a', undefined, false)).toBeNull();
    clock += 1;
    expect(r.known('junk-a', undefined, false)).toBeUndefined();
    const short = createAccountResolver({ from: 'introspect', introspect, cacheTtlMs: 2_000, now });
    expect(await short.resolve('junk-b', undefined, false)).toBeNull();
    clock += 2_000;
    expect(short.known('junk-b', undefined, false)).toBeUndefined();
  });

  it('never evict a valid token: a flood of junk tokens leaves the account answers cached', async () => {
    const r = createAccountResolver({ from: 'introspect', introspect, cacheTtlMs: 300_000, maxEntries: 2, now });
    expect(await r.resolve('user-1', undefined, false)).toBe('a:1');
    for (let i = 0; i < 10; i++) expect(await r.resolve(`junk-${i}x`, undefined, false)).toBeNull();
    expect(r.known('user-1', undefined, false)).toBe('a:1');
    expect(calls.get('user-1')).toBe(1);
    // The invalid side is bounded too: the oldest junk answers were evicted.
    expect(r.known('junk-0x', undefined, false)).toBeUndefined();
    expect(r.known('junk-9x', undefined, false)).toBeNull();
  });

  it('introspects() is true only when an upstream call would start: not cached, not in flight', async () => {
    const r = createAccountResolver({ from: 'introspect', introspect, cacheTtlMs: 300_000, now });
    expect(r.introspects('user-5')).toBe(true);
    const pending = r.resolve('user-5', undefined, false);
    expect(r.introspects('user-5')).toBe(false);
    await pending;
    expect(r.introspects('user-5')).toBe(false);
    expect(r.introspects(null)).toBe(false);
    expect(r.introspects('a b')).toBe(false);
    expect(createAccountResolver({ from: 'token' }).introspects('user-5')).toBe(false);
  });
});

describe('account by introspection over HTTP', () => {
  const fx = introspectionFixture(8);
  const { introspect } = fx;
  let clock = 1_000_000;
  const now = (): number => clock;

  const resolver = (cacheTtlMs = 300_000, maxEntries?: number) =>
    createAccountResolver({
      from: 'introspect',
      introspect,
      cacheTtlMs,
      now,
      ...(maxEntries === undefined ? {} : { maxEntries }),
    });

  it('keys a user token on its account id', async () => {
    expect(await resolver().resolve('user-111', undefined, false)).toBe('a:111');
  });

  it('answers a cached token synchronously without a second upstream call', async () => {
    const r = resolver();
    expect(await r.resolve('user-222', undefined, false)).toBe('a:222');
    const second = r.resolve('user-222', undefined, false);
    expect(second).toBe('a:222'); // a plain value, not a Promise
    expect(fx.server.calls.get('user-222')).toBe(1);
  });

  it('asks again once the cache entry has expired', async () => {
    const r = resolver(60_000);
    await r.resolve('user-333', undefined, false);
    clock += 59_999;
    expect(r.resolve('user-333', undefined, false)).toBe('a:333');
    clock += 1;
    expect(await r.resolve('user-333', undefined, false)).toBe('a:333');
    expect(fx.server.calls.get('user-333')).toBe(2);
  });

  it('100 concurrent first requests for one token make exactly one upstream call', async () => {
    const r = resolver();
    const keys = await Promise.all(Array.from({ length: 100 }, async () => r.resolve('user-444', undefined, false)));
    expect(new Set(keys)).toEqual(new Set(['a:444']));
    expect(fx.server.calls.get('user-444')).toBe(1);
  });

  it('an invalid token (401) has no account, and that answer is cached for 60 s by default (issue 37)', async () => {
    const r = resolver(300_000);
    expect(await r.resolve('app', undefined, false)).toBeNull();
    const before = fx.server.calls.get('app') ?? 0;
    clock += 59_999;
    expect(r.introspects('app')).toBe(false);
    expect(r.resolve('app', undefined, false)).toBeNull();
    expect(fx.server.calls.get('app')).toBe(before);
    clock += 1;
    expect(r.introspects('app')).toBe(true);
    expect(await r.resolve('app', undefined, false)).toBeNull();
    expect(fx.server.calls.get('app')).toBe(before + 1);
  });

  it('an upstream failure cannot be used to dodge the account bucket: 500 falls back to the digest key, uncached', async () => {
    const r = resolver();
    expect(await r.resolve('boom', undefined, false)).toBe(`t:${sha('boom')}`);
    expect(await r.resolve('boom', undefined, false)).toBe(`t:${sha('boom')}`);
    expect(fx.server.calls.get('boom')).toBe(2);
  });

  it('a timeout falls back to the digest key', async () => {
    expect(await resolver().resolve('slow', undefined, false)).toBe(`t:${sha('slow')}`);
  });

  it('a refused connection falls back to the digest key', async () => {
    const origin = await refusedOrigin();
    const refused = new Pool(origin);
    try {
      const r = createAccountResolver({
        from: 'introspect',
        introspect: createHttpIntrospector({ dispatcher: refused, origin, path: PATH, timeoutMs: 1_000 }),
        cacheTtlMs: 60_000,
      });
      expect(await r.resolve('user-1', undefined, false)).toBe(`t:${sha('user-1')}`);
    } finally {
      await refused.destroy();
    }
  });

  it('a flood of random tokens cannot grow the cache past its bound', async () => {
    const r = resolver(300_000, 2);
    for (const t of ['user-a1', 'user-a2', 'user-a3']) await r.resolve(t, undefined, false);
    expect(r.resolve('user-a3', undefined, false)).toBe('a:a3'); // still cached
    expect(await r.resolve('user-a1', undefined, false)).toBe('a:a1'); // evicted, asked again
    expect(fx.server.calls.get('user-a1')).toBe(2);
    expect(fx.server.calls.get('user-a3')).toBe(1);
  });

  it('the token never appears in any key, whatever the upstream answers', async () => {
    const r = resolver();
    const tokens = ['user-9f8e7d6c5b4a', 'app', 'boom', 'badjson', 'noid', 'unknown-token-zzz'];
    const keys: AccountKey[] = [];
    for (const t of tokens) keys.push(await r.resolve(t, undefined, false));
    for (const [i, k] of keys.entries()) {
      const t = tokens[i]!;
      if (k !== null) expect(k.includes(t), `${t} → ${k}`).toBe(false);
    }
  });
});

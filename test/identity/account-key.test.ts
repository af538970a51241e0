import { describe, expect, it } from 'vitest';
import { accountKeyNamedBy, accountKeysNamedBy } from '../../src/identity/account-key.js';
import { createAccountResolver, tokenDigest } from '../../src/identity/index.js';

describe('account keys named by an operator', () => {
  it('meet the keys the resolver gives requests, in every mode', async () => {
    const token = 'sekrit-token';
    const digest = tokenDigest(token);
    const byToken = createAccountResolver({ from: 'token' }).resolve(token, undefined, false);
    expect(accountKeyNamedBy('token', digest.toUpperCase())).toBe(byToken);
    const byHeader = createAccountResolver({ from: 'header', header: 'x-account-id' }).resolve(null, 'alice {x}', true);
    expect(accountKeyNamedBy('header', 'alice {x}')).toBe(byHeader);
    const introspecting = createAccountResolver({
      from: 'introspect',
      cacheTtlMs: 1_000,
      introspect: async () => ({ kind: 'account', id: '42' }),
    });
    expect(accountKeyNamedBy('introspect', '42')).toBe(await introspecting.resolve(token, undefined, false));
    for (const key of [byToken, byHeader, 'a:42'])
      expect(accountKeysNamedBy(key === byToken ? digest : key === byHeader ? 'alice {x}' : '42')).toContain(key);
  });

  it('refuse what cannot be a key: a token digest that is not SHA-256 hex, an empty or overlong id', () => {
    expect(accountKeyNamedBy('token', 'not-a-digest')).toBeNull();
    expect(accountKeyNamedBy('header', '')).toBeNull();
    expect(accountKeyNamedBy('introspect', 'x'.repeat(257))).toBeNull();
  });
});

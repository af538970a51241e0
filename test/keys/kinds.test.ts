/** The key-kind table (src/keys): every kind complete and distinct, the `per:` syntax it gives the schema, and the JWT claim reading. */
import { describe, expect, it } from 'vitest';
import {
  claimValue,
  compileKey,
  jwtPayload,
  KIND_NAMES,
  KINDS,
  MAX_JWT_LENGTH,
  perError,
  PER_HINT,
  PER_PATTERN,
  typedTags,
} from '../../src/keys/index.js';
import { keyFacts } from '../support/key-facts.js';

const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');
const jwt = (payload: unknown, header: unknown = { alg: 'HS256', typ: 'JWT' }) => `${b64(header)}.${b64(payload)}.c2ln`;

describe('the key-kind table', () => {
  it('has one entry per kind with a tag of its own, and the schema’s hint and pattern list them all', () => {
    expect(KIND_NAMES).toEqual(['ip', 'account', 'global', 'token', 'header', 'param', 'cookie', 'jwt', 'signature']);
    const tags = KIND_NAMES.map((k) => KINDS[k].tag);
    expect(new Set(tags).size).toBe(tags.length);
    expect(PER_HINT).toBe(
      'ip, account, global, token, header:NAME, param:NAME, cookie:NAME, jwt:CLAIM, signature:domain',
    );
    for (const per of ['ip', 'global', 'header:x', 'jwt:sub', 'cookie:sid'])
      expect(PER_PATTERN.test(per), per).toBe(true);
    for (const per of ['ips', 'ip:x', 'header', 'jwt', 'signature']) expect(PER_PATTERN.test(per), per).toBe(false);
  });

  it('checks each kind’s name and normalizes it in the label', () => {
    expect(compileKey('header:X-App-Id').label).toBe('header:x-app-id');
    expect(compileKey('param:user[email]').parts[0]!.arg.path).toEqual(['user', 'email']);
    expect(compileKey('jwt:https://example.com/tenant').label).toBe('jwt:https://example.com/tenant');
    expect(perError('jwt:')).toBe('invalid claim name "" in per "jwt:" (a JWT claim name, e.g. sub or tenant_id)');
    expect(perError('jwt:has space')).toMatch(/invalid claim name "has space"/);
    expect(perError('cookie:a b')).toMatch(/invalid cookie name/);
    expect(perError('global:x')).toBe(`must be one of ${PER_HINT} (got "global:x")`);
  });

  it('digests what an operator types as the request path digests what a client sends', () => {
    const ctx = { ipv6Prefix: 64, accountFrom: 'introspect' as const };
    expect(typedTags(compileKey('ip'), '2001:db8::1', ctx)).toEqual(['ip:2001:db8::/64']);
    expect(typedTags(compileKey('ip'), 'nope', ctx)).toEqual({ hint: 'an IP address' });
    expect(typedTags(compileKey('account'), '42', ctx)).toEqual(['acct:a:42']);
    const d = 'ab'.repeat(32);
    expect(typedTags(compileKey('token'), d.toUpperCase(), ctx)).toHaveLength(2);
    expect((typedTags(compileKey('token'), d, ctx) as string[])[0]).toBe(`tok:${d}`);
    const claim = compileKey('jwt:sub');
    const tag = claim.tag(keyFacts({ token: `${b64({})}.${b64({ sub: ' alice ' })}.s` }));
    expect(typedTags(claim, 'alice', ctx)).toEqual([tag]);
    expect(typedTags(claim, '  ', ctx)).toEqual({ hint: 'the claim value' });
  });
});

describe('reading a JWT claim, unverified', () => {
  it('reads a string or number claim of a header.payload.signature token', () => {
    const p = jwtPayload(jwt({ sub: 'alice', tenant: 42, admin: true, org: { id: 1 } }));
    expect(claimValue(p, 'sub')).toBe('alice');
    expect(claimValue(p, 'tenant')).toBe('42');
    expect(claimValue(p, 'admin')).toBeUndefined();
    expect(claimValue(p, 'org')).toBeUndefined();
    expect(claimValue(p, 'missing')).toBeUndefined();
    expect(claimValue(p, 'toString')).toBeUndefined();
    // An unsigned token (empty signature) is read the same: nothing here trusts the signature.
    expect(claimValue(jwtPayload(`${b64({ alg: 'none' })}.${b64({ sub: 'x' })}.`), 'sub')).toBe('x');
  });

  it('reads nothing from what is not a JWT within bounds', () => {
    for (const t of [
      'opaque-token',
      'a.b',
      'a.b.c.d',
      `.${b64({ sub: 'x' })}.s`,
      `${b64({})}..s`,
      `${b64({})}.${b64('[1,2]')}.s`,
      `${b64({})}.${b64('not json')}.s`,
      `${b64({})}.${b64({ sub: 'x' })}!.s`,
      jwt({ sub: 'x'.repeat(MAX_JWT_LENGTH) }),
    ]) {
      expect(claimValue(jwtPayload(t), 'sub'), t.slice(0, 40)).toBeUndefined();
    }
    expect(claimValue(jwtPayload(jwt({ sub: 'x'.repeat(257) })), 'sub')).toBeUndefined();
    expect(claimValue(jwtPayload(jwt({ sub: '   ' })), 'sub')).toBeUndefined();
  });
});

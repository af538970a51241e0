/** The shared Rack parameter tree: pair splitting as Rails 8 splits, and bracket-name look-ups. */
import { describe, expect, it } from 'vitest';
import { formPairs, fromJson, lookUp, parseKey, parseUrlEncoded } from '../../src/rails/rack-params.js';

describe('formPairs', () => {
  it('splits on & and ;, drops spaces right after a separator, and decodes + and escapes', () => {
    expect(formPairs('a=1&b=2;c=3&  d=x+y&e=%41%20B&&f')).toEqual([
      ['a', '1'],
      ['b', '2'],
      ['c', '3'],
      ['d', 'x y'],
      ['e', 'A B'],
      ['f', ''],
    ]);
  });

  it('keeps a broken escape as written instead of throwing', () => {
    expect(formPairs('t=%zz&u=%E0%A4')).toEqual([
      ['t', '%zz'],
      ['u', '%E0%A4'],
    ]);
  });

  it('finds a name hidden behind spaces after a separator, as Rails does', () => {
    expect(lookUp(parseUrlEncoded('x=1&   access_token=secret'), ['access_token'])).toBe('secret');
  });
});

describe('lookUp', () => {
  it('reads a bracket name from a form tree and from the same JSON shape', () => {
    const path = parseKey('user[email]')!;
    expect(lookUp(parseUrlEncoded('user[email]=a@b.c&user[name]=n'), path)).toBe('a@b.c');
    expect(lookUp(fromJson({ user: { email: 'a@b.c' } }), path)).toBe('a@b.c');
  });

  it('answers undefined for a missing name, a scalar where a hash is wanted, and array steps', () => {
    expect(lookUp(parseUrlEncoded('user=x'), ['user', 'email'])).toBeUndefined();
    expect(lookUp(parseUrlEncoded('a=1'), ['b'])).toBeUndefined();
    expect(lookUp(parseUrlEncoded('a[]=1'), ['a', ''])).toBeUndefined();
  });
});

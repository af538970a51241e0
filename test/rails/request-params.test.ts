/** Where the gateway finds a token and the routed method, as Doorkeeper and Rack::MethodOverride do. */
import { describe, expect, it } from 'vitest';
import {
  compileWantedParams,
  doorkeeperToken,
  NO_VALUES,
  pickParam,
  QueryParams,
  queryValues as readQuery,
  resolveMethodOverride,
  TOKEN_PARAMS,
} from '../../src/rails/request-params.js';

const tokens = compileWantedParams(TOKEN_PARAMS);
const queryValues = (text: string, wanted: typeof tokens) => readQuery(new QueryParams(text), wanted);
const q = (s: string): ReadonlyMap<string, string> => queryValues(s, tokens)!;

describe('compileWantedParams', () => {
  it('keeps each name once with its bracket path and top-level key', () => {
    const w = compileWantedParams(['user[email]', 'access_token', 'user[email]']);
    expect(w.names).toEqual(['user[email]', 'access_token']);
    expect(w.paths).toEqual([['user', 'email'], ['access_token']]);
    expect([...w.tops]).toEqual(['user', 'access_token']);
  });

  it('refuses names that are not one value', () => {
    expect(() => compileWantedParams([''])).toThrow();
    expect(() => compileWantedParams(['ids[]'])).toThrow(/one parameter/);
  });
});

describe('queryValues', () => {
  it('reads access_token and bearer_token from the query string, the last one winning as in Rack', () => {
    expect(Object.fromEntries(q('a=1;b=2&access_token=x&access_token=y&bearer_token=z'))).toEqual({
      access_token: 'y',
      bearer_token: 'z',
    });
  });

  it('refuses (null) a query whose wanted values differ split on "&" only and on "&" and ";"', () => {
    expect(queryValues('access_token=a&x=1;access_token=b', tokens)).toBeNull();
    expect(queryValues('x=1;y=2&access_token=a', tokens)).not.toBeNull();
  });

  it('finds a percent-encoded name, and skips parsing a query that cannot name a wanted parameter', () => {
    expect(q('%61ccess_token=enc').get('access_token')).toBe('enc');
    expect(q('x=1&%20access_token=no').size).toBe(0);
    expect(q('page=2&limit=40').size).toBe(0);
  });

  it('treats an array where one value is wanted as present but empty', () => {
    expect(q('access_token[]=x').get('access_token')).toBe('');
  });

  it('answers null for a query Rails would refuse', () => {
    expect(queryValues('access_token=1&access_token[a]=2', tokens)).toBeNull();
  });

  it('reads the wanted values from the query’s own tree, which later lookups share', () => {
    const query = new QueryParams('access_token=x&user[email]=a%40b');
    expect(readQuery(query, tokens)!.get('access_token')).toBe('x');
    const tree = query.hash();
    expect(tree).not.toBeNull();
    expect(query.hash()).toBe(tree);
    expect(new QueryParams('a=1&a[b]=2').hash()).toBeNull();
  });
});

describe('doorkeeperToken', () => {
  it('prefers the Authorization header, then access_token, then bearer_token', () => {
    expect(doorkeeperToken('Bearer h', q('access_token=a'), NO_VALUES)).toEqual({
      kind: 'token',
      token: 'h',
      from: 'header',
    });
    expect(doorkeeperToken(undefined, q('bearer_token=b&access_token=a'), NO_VALUES)).toEqual({
      kind: 'token',
      token: 'a',
      from: 'param',
    });
    expect(doorkeeperToken('Basic eA==', q('bearer_token=b'), NO_VALUES)).toEqual({
      kind: 'token',
      token: 'b',
      from: 'param',
    });
    expect(doorkeeperToken(undefined, NO_VALUES, new Map([['access_token', 'body']]))).toEqual({
      kind: 'token',
      token: 'body',
      from: 'param',
    });
  });

  it('reads the header as Doorkeeper does: "Bearer " with one space; a tab or a blank token falls through to the parameters', () => {
    expect(doorkeeperToken('Bearer\tjunk', q('access_token=real'), NO_VALUES)).toMatchObject({
      token: 'real',
      from: 'param',
    });
    expect(doorkeeperToken('Bearer    ', q('access_token=real'), NO_VALUES)).toMatchObject({
      token: 'real',
      from: 'param',
    });
    expect(doorkeeperToken('bEaReR a b', q('access_token=real'), NO_VALUES)).toEqual({
      kind: 'token',
      token: 'a b',
      from: 'header',
    });
  });

  it('skips blank values, and finds nothing when there is nothing', () => {
    expect(doorkeeperToken(undefined, q('access_token=&bearer_token=b'), NO_VALUES)).toMatchObject({ token: 'b' });
    expect(doorkeeperToken(undefined, NO_VALUES, NO_VALUES)).toEqual({ kind: 'none' });
  });

  it('reports a token given in the query and the body with different values as a conflict', () => {
    expect(doorkeeperToken(undefined, q('access_token=a'), new Map([['access_token', 'b']]))).toEqual({
      kind: 'conflict',
      param: 'access_token',
    });
    expect(doorkeeperToken(undefined, q('access_token=a'), new Map([['access_token', 'a']]))).toMatchObject({
      token: 'a',
    });
  });

  it('picks one parameter from query and body', () => {
    expect(pickParam('x', new Map(), new Map())).toEqual({ kind: 'absent' });
    expect(pickParam('x', new Map(), new Map([['x', '1']]))).toEqual({ kind: 'value', value: '1' });
  });
});

describe('resolveMethodOverride (Rack::MethodOverride)', () => {
  it('routes a POST by the X-HTTP-Method-Override header, upper-cased', () => {
    expect(resolveMethodOverride('POST', 'delete', undefined)).toEqual({ method: 'DELETE', dropHeader: false });
    expect(resolveMethodOverride('POST', 'PATCH', undefined)).toEqual({ method: 'PATCH', dropHeader: false });
  });

  it('lets the _method form field win over the header, even when empty', () => {
    expect(resolveMethodOverride('POST', 'PUT', 'delete')).toEqual({ method: 'DELETE', dropHeader: true });
    expect(resolveMethodOverride('POST', 'DELETE', '')).toEqual({ method: 'POST', dropHeader: true });
    expect(resolveMethodOverride('POST', undefined, 'Delete')).toEqual({ method: 'DELETE', dropHeader: false });
  });

  it('accepts only the methods Rack lists, and only on a POST', () => {
    for (const m of ['GET', 'HEAD', 'PUT', 'POST', 'DELETE', 'OPTIONS', 'PATCH', 'LINK', 'UNLINK']) {
      expect(resolveMethodOverride('POST', m.toLowerCase(), undefined).method).toBe(m);
    }
    expect(resolveMethodOverride('POST', 'TRACE', undefined)).toEqual({ method: 'POST', dropHeader: true });
    expect(resolveMethodOverride('POST', 'DELETE, DELETE', undefined)).toEqual({ method: 'POST', dropHeader: true });
    expect(resolveMethodOverride('PUT', 'DELETE', undefined)).toEqual({ method: 'PUT', dropHeader: true });
    expect(resolveMethodOverride('GET', undefined, 'delete')).toEqual({ method: 'GET', dropHeader: false });
  });

  it('leaves a POST without an override alone', () => {
    expect(resolveMethodOverride('POST', undefined, undefined)).toEqual({ method: 'POST', dropHeader: false });
  });
});

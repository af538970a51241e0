/** @module Parsing `match:` patterns and the messages that invalid ones produce. */
import { describe, expect, it } from 'vitest';
import { parsePattern, type ParsedPattern } from '../../src/routing/pattern.js';

function parsed(source: string): Omit<ParsedPattern, 'source' | 'format'> {
  const r = parsePattern(source);
  if (!r.ok) throw new Error(r.error);
  return { method: r.pattern.method, segments: r.pattern.segments };
}

function error(source: string): string {
  const r = parsePattern(source);
  if (r.ok) throw new Error(`${source} parsed`);
  return r.error;
}

describe('parsePattern', () => {
  it('reads a method and a path of literal segments', () => {
    expect(parsed('POST /api/v1/accounts')).toEqual({
      method: 'POST',
      segments: [
        { kind: 'literal', value: 'api' },
        { kind: 'literal', value: 'v1' },
        { kind: 'literal', value: 'accounts' },
      ],
    });
  });

  it('reads a path alone as any method', () => {
    expect(parsed('/api/*')).toEqual({ method: null, segments: [{ kind: 'literal', value: 'api' }, { kind: 'rest' }] });
  });

  it('reads :name as a parameter segment', () => {
    expect(parsed('DELETE /api/v1/statuses/:id').segments[3]).toEqual({ kind: 'param', name: 'id' });
  });

  it('accepts the root path, a bare star, extra whitespace and any uppercase token method', () => {
    expect(parsed('/')).toEqual({ method: null, segments: [] });
    expect(parsed('/*')).toEqual({ method: null, segments: [{ kind: 'rest' }] });
    expect(parsed('  GET\t /a ')).toEqual({ method: 'GET', segments: [{ kind: 'literal', value: 'a' }] });
    expect(parsed('PROPFIND /dav').method).toBe('PROPFIND');
    expect(parsed('M-SEARCH /x').method).toBe('M-SEARCH');
  });

  it('normalizes literal segments as request paths are normalized', () => {
    expect(parsed('/%61pi/%7euser/a%62').segments).toEqual([
      { kind: 'literal', value: 'api' },
      { kind: 'literal', value: '~user' },
      { kind: 'literal', value: 'ab' },
    ]);
    expect(parsed('/tags/caf%c3%a9').segments[1]).toEqual({ kind: 'literal', value: 'caf%C3%A9' });
  });

  it('keeps the source as written', () => {
    const r = parsePattern(' GET /a ');
    expect(r.ok && r.pattern.source).toBe(' GET /a ');
  });

  it.each([
    ['', 'empty pattern (write "METHOD /path" or "/path")'],
    ['   ', 'empty pattern (write "METHOD /path" or "/path")'],
    ['get /a', 'method "get" must be uppercase ("GET")'],
    ['G(T /a', 'invalid method "G(T"'],
    ['POST', '"POST" has no path (write "POST /path")'],
    ['api/v1', 'path must start with "/", got "api/v1"'],
    ['POST api/v1', 'path must start with "/", got "api/v1"'],
    ['POST /a /b', 'expected "METHOD /path" or "/path", got "POST /a /b"'],
    ['/api/*/x', '"*" is only allowed as the last segment, in "/api/*/x"'],
    ['/api/**', '"*" must be a whole segment, in "/api/**"'],
    ['/api/v*', '"*" must be a whole segment, in "/api/v*"'],
    ['/a/:', 'empty parameter name ":" in "/a/:"'],
    ['/a/:1d', 'invalid parameter name ":1d" in "/a/:1d" (letters, digits and _, not starting with a digit)'],
    ['/a//b', 'empty segment in "/a//b" (request paths have no "//" or trailing "/")'],
    ['/a/', 'empty segment in "/a/" (request paths have no "//" or trailing "/")'],
    ['/a?x=1', 'a pattern matches paths only, not a query string: "/a?x=1"'],
    ['/a/../b', 'invalid segment ".." in "/a/../b": path contains a "." or ".." segment'],
    ['/a/./b', 'invalid segment "." in "/a/./b": path contains a "." or ".." segment'],
    ['/a%2Fb', 'invalid segment "a%2Fb" in "/a%2Fb": path contains an encoded "/" (%2F)'],
    ['/a%zz', 'invalid segment "a%zz" in "/a%zz": path contains a malformed percent-escape'],
  ])('%j is refused: %s', (source, message) => {
    expect(error(source)).toBe(message);
  });
});

describe("parsePattern: Rails' (.:format)", () => {
  it('reads a final (.:format) as a flag on the pattern', () => {
    const r = parsePattern('POST /auth/sign_in(.:format)');
    expect(r.ok && r.pattern.format).toBe(true);
    expect(r.ok && r.pattern.segments).toEqual([
      { kind: 'literal', value: 'auth' },
      { kind: 'literal', value: 'sign_in' },
    ]);
  });

  it('refuses (.:format) anywhere but at the end, and after nothing or a *', () => {
    expect(error('POST /auth(.:format)/password')).toBe(
      '"(.:format)" is only allowed at the end of a pattern, in "/auth(.:format)/password"',
    );
    expect(error('/api/*(.:format)')).toBe(
      '"(.:format)" must follow a literal or :name segment, in "/api/*(.:format)"',
    );
    expect(error('/(.:format)')).toBe('"(.:format)" must follow a literal or :name segment, in "/(.:format)"');
    expect(error('/auth(.:locale)')).toBe(
      'optional parts are not supported except a final "(.:format)", in "/auth(.:locale)"',
    );
  });
});

/** @module Path normalization (SPEC §4.1): the tricks that would let a request dodge its limit. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { normalizePath, REJECT } from '../../src/routing/normalize.js';

describe('normalizePath', () => {
  it.each([
    ['/api/v1/accounts', '/api/v1/accounts', ''],
    ['/', '/', ''],
    ['/api/v1/statuses/1?x=1&y=%2F', '/api/v1/statuses/1', '?x=1&y=%2F'],
    ['/?', '/', '?'],
    ['//api///v1//accounts', '/api/v1/accounts', ''],
    ['/api/v1/accounts/', '/api/v1/accounts', ''],
    ['/api/v1/accounts//?a=b', '/api/v1/accounts', '?a=b'],
    ['//', '/', ''],
    ['/%61pi/v1/accounts', '/api/v1/accounts', ''],
    ['/%41%5a%30%2D%2e%5F%7E', '/AZ0-._~', ''],
    ['/tags/caf%c3%a9', '/tags/caf%C3%A9', ''],
    ['/a%3fb', '/a%3Fb', ''],
    ['/a%25b', '/a%25b', ''],
    ['/a%252Fb', '/a%252Fb', ''],
    ['/.well-known/x', '/.well-known/x', ''],
    ['/a/..b/c.', '/a/..b/c.', ''],
    ['/a/.%2e.', '/a/...', ''],
    ['/a;b=c', '/a;b=c', ''],
    ['/a?b\\c#d', '/a', '?b\\c#d'],
  ])('%j becomes %j with query %j', (input, path, query) => {
    expect(normalizePath(input)).toEqual({ ok: true, path, query });
  });

  it.each([
    ['', REJECT.notOrigin],
    ['*', REJECT.notOrigin],
    ['http://example.com/api/v1/accounts', REJECT.notOrigin],
    ['api/v1/accounts', REJECT.notOrigin],
    ['/api/v1/./accounts', REJECT.dotSegment],
    ['/api/v1/x/../accounts', REJECT.dotSegment],
    ['/api/v1/x/..', REJECT.dotSegment],
    ['/.', REJECT.dotSegment],
    ['/api/v1/x/%2e%2E/accounts', REJECT.dotSegment],
    ['/api/v1/x/.%2e/accounts', REJECT.dotSegment],
    ['/api/v1/%2e/accounts', REJECT.dotSegment],
    ['/api/v1%2Faccounts', REJECT.encodedSlash],
    ['/api/v1%2faccounts', REJECT.encodedSlash],
    ['/api/v1%5Caccounts', REJECT.encodedBackslash],
    ['/api/v1%5caccounts', REJECT.encodedBackslash],
    ['/api\\v1\\accounts', REJECT.backslash],
    ['/api/v1/accounts%00', REJECT.nul],
    ['/api/v1/accounts\0', REJECT.nul],
    ['/api/%zz', REJECT.malformedEscape],
    ['/api/%', REJECT.malformedEscape],
    ['/api/%4', REJECT.malformedEscape],
    ['/api/%4/x', REJECT.malformedEscape],
    ['/api/a b', REJECT.control],
    ['/api/a\tb', REJECT.control],
    ['/api/a\x7fb', REJECT.control],
    ['/api/a\r\nb', REJECT.control],
    ['/api?x=\n', REJECT.control],
    ['/api/caf\u00e9', REJECT.nonAscii],
    ['/api/v1/accounts#x', REJECT.fragment],
  ])('%j is rejected: %s', (input, reason) => {
    expect(normalizePath(input)).toEqual({ ok: false, reason });
  });

  it('leaves an already normal path unchanged', () => {
    const target = '/api/v1/statuses/109367461358294711';
    const r = normalizePath(target);
    expect(r.ok && r.path).toBe(target);
  });

  const alphabet = fc.constantFrom(
    '/',
    '/',
    'a',
    'B',
    '1',
    '.',
    '..',
    '%',
    '%2e',
    '%2E',
    '%2F',
    '%5c',
    '%00',
    '%41',
    '%7e',
    '%c3',
    '%zz',
    '%2',
    '\\',
    '?',
    '#',
    ' ',
    '\0',
    '\n',
    '~',
    ':',
    ';',
    '=',
    '@',
    '*',
    'é',
  );
  const target = fc.oneof(
    fc.array(alphabet, { maxLength: 16 }).map((parts) => parts.join('')),
    fc.array(alphabet, { maxLength: 16 }).map((parts) => `/${parts.join('')}`),
    fc.string({ unit: 'binary-ascii', maxLength: 30 }),
    fc.string({ maxLength: 30 }).map((s) => `/${s}`),
  );

  it('either rejects a target or yields a normal path that is its own normal form', () => {
    fc.assert(
      fc.property(target, (input) => {
        const r = normalizePath(input);
        if (!r.ok) return;
        const again = normalizePath(r.path);
        expect(again).toEqual({ ok: true, path: r.path, query: '' });
        expect(r.path.startsWith('/')).toBe(true);
        expect(r.path).not.toContain('//');
        expect(r.path).not.toContain('?');
        expect(r.path).not.toMatch(/%2F|%5C|%00/i);
        expect(r.path).not.toMatch(/(^|\/)\.\.?(\/|$)/);
        expect(r.path === '/' || !r.path.endsWith('/')).toBe(true);
        expect(input.endsWith(r.query)).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('never decodes anything but unreserved characters, and writes remaining escapes in uppercase', () => {
    fc.assert(
      fc.property(target, (input) => {
        const r = normalizePath(input);
        if (!r.ok) return;
        for (const m of r.path.matchAll(/%([0-9A-Fa-f]{2})/g)) {
          const hex = m[1] ?? '';
          expect(hex).toBe(hex.toUpperCase());
          expect(/[A-Za-z0-9\-._~]/.test(String.fromCharCode(parseInt(hex, 16)))).toBe(false);
        }
      }),
      { numRuns: 2000 },
    );
  });
});

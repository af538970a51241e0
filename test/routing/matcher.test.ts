/** @module The compiled matcher: which rules a (method, normalized path) falls under. */
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/index.js';
import { compileMatcher } from '../../src/routing/matcher.js';

const SHIPPED = fileURLToPath(new URL('../../config/limits.yaml', import.meta.url));
const seed = await loadConfigFile(SHIPPED);
const names = (method: string, path: string): string[] => seed.matcher.match(method, path).map((r) => r.name);

interface Rule {
  readonly name: string;
  readonly patterns: readonly string[];
}
const rule = (name: string, ...patterns: string[]): Rule => ({ name, patterns });
const matcherOf = (...rules: Rule[]) => {
  const m = compileMatcher(rules);
  return (method: string, path: string): string[] => m.match(method, path).map((r) => r.name);
};

describe('the seed’s five rules', () => {
  it('sign-up is counted with both general rules, in table order', () => {
    expect(names('POST', '/api/v1/accounts')).toEqual(['account-access', 'ip-access', 'sign-up']);
  });

  it('both deletion routes fall in the one deletion rule', () => {
    expect(names('DELETE', '/api/v1/statuses/123')).toEqual(['account-access', 'ip-access', 'deletion']);
    expect(names('POST', '/api/v1/statuses/9/unreblog')).toEqual(['account-access', 'ip-access', 'deletion']);
  });

  it('uploading matches POST /api/v1/media and /api/v2/media, as Mastodon throttles both', () => {
    expect(names('POST', '/api/v1/media')).toEqual(['account-access', 'ip-access', 'uploading']);
    expect(names('POST', '/api/v2/media')).toEqual(['account-access', 'ip-access', 'uploading']);
    expect(names('POST', '/api/v3/media')).toEqual(['account-access', 'ip-access']);
    expect(names('GET', '/api/v1/media')).toEqual(['account-access', 'ip-access']);
  });

  it('POST /api/v1/accounts.json is another path, not sign-up', () => {
    expect(names('POST', '/api/v1/accounts.json')).toEqual(['account-access', 'ip-access']);
  });

  it('the wrong method, an extra or a missing segment is not the specific rule', () => {
    expect(names('GET', '/api/v1/accounts')).toEqual(['account-access', 'ip-access']);
    expect(names('POST', '/api/v1/accounts/1')).toEqual(['account-access', 'ip-access']);
    expect(names('DELETE', '/api/v1/statuses')).toEqual(['account-access', 'ip-access']);
    expect(names('POST', '/api/v1/statuses/9/unreblog/x')).toEqual(['account-access', 'ip-access']);
    expect(names('POST', '/api/v1/statuses/9/reblog')).toEqual(['account-access', 'ip-access']);
  });

  it('/api/* covers /api itself and any depth below it', () => {
    expect(names('GET', '/api')).toEqual(['account-access', 'ip-access']);
    expect(names('GET', '/api/v1/x/y')).toEqual(['account-access', 'ip-access']);
  });

  it('paths outside /api match nothing', () => {
    expect(names('GET', '/')).toEqual([]);
    expect(names('POST', '/oauth/token')).toEqual([]);
    expect(names('GET', '/apis')).toEqual([]);
  });

  it('matching is case-sensitive in the path and the method', () => {
    expect(names('GET', '/API/v1/accounts')).toEqual([]);
    expect(names('post', '/api/v1/accounts')).toEqual(['account-access', 'ip-access']);
  });

  it('a HEAD request is counted by rules written for GET, as Rails serves HEAD with GET routes', () => {
    const match = matcherOf(rule('reads', 'GET /api/v1/statuses/:id'), rule('writes', 'POST /api/v1/statuses'));
    expect(match('HEAD', '/api/v1/statuses/1')).toEqual(['reads']);
    expect(match('HEAD', '/api/v1/statuses')).toEqual([]);
    // The converse does not hold: a rule for HEAD says nothing about GET.
    expect(matcherOf(rule('head', 'HEAD /x'))('GET', '/x')).toEqual([]);
  });
});

describe('result arrays', () => {
  it('are the same frozen instance every time the same rules match', () => {
    const a = seed.matcher.match('DELETE', '/api/v1/statuses/1');
    const b = seed.matcher.match('POST', '/api/v1/statuses/2/unreblog');
    expect(a).toBe(b);
    expect(Object.isFrozen(a)).toBe(true);
    expect(seed.matcher.match('POST', '/api/v1/accounts')).toBe(seed.matcher.match('POST', '/api/v1/accounts'));
  });

  it('no match is one shared frozen empty array', () => {
    const a = seed.matcher.match('GET', '/');
    expect(a).toEqual([]);
    expect(a).toBe(seed.matcher.match('POST', '/oauth/token'));
    expect(Object.isFrozen(a)).toBe(true);
  });

  it('hold the rule objects themselves', () => {
    expect(seed.matcher.match('POST', '/api/v1/accounts')[2]).toBe(seed.rules[2]);
  });
});

describe('pattern semantics', () => {
  it('a rule with two patterns that both match counts once', () => {
    const match = matcherOf(rule('twice', '/a/*', 'GET /a/:x'), rule('other', '/a/b'));
    expect(match('GET', '/a/b')).toEqual(['twice', 'other']);
  });

  it(':name takes exactly one segment', () => {
    const match = matcherOf(rule('p', '/s/:id'));
    expect(match('GET', '/s/1')).toEqual(['p']);
    expect(match('GET', '/s')).toEqual([]);
    expect(match('GET', '/s/1/2')).toEqual([]);
  });

  it('a literal and a parameter at the same place both match', () => {
    const match = matcherOf(rule('param', '/s/:id/x'), rule('lit', '/s/new/x'));
    expect(match('GET', '/s/new/x')).toEqual(['param', 'lit']);
    expect(match('GET', '/s/9/x')).toEqual(['param']);
  });

  it('/ matches only the root and /* matches everything', () => {
    const match = matcherOf(rule('root', '/'), rule('all', '/*'));
    expect(match('GET', '/')).toEqual(['root', 'all']);
    expect(match('GET', '/a/b/c')).toEqual(['all']);
  });

  it('results follow table order, not pattern specificity', () => {
    const match = matcherOf(rule('specific', 'POST /a/b'), rule('general', '/*'));
    expect(match('POST', '/a/b')).toEqual(['specific', 'general']);
  });

  it('tables larger than a bit mask still return shared, ordered results', () => {
    const rules = Array.from({ length: 60 }, (_, i) => rule(`r${i}`, i % 2 === 0 ? '/x/*' : `/x/${i}`));
    const m = compileMatcher(rules);
    const r = m.match('GET', '/x/59');
    expect(r.map((x) => x.name)).toEqual(rules.filter((_, i) => i % 2 === 0 || i === 59).map((x) => x.name));
    expect(m.match('GET', '/x/59')).toBe(r);
    expect(m.match('GET', '/x/58')).toBe(m.match('GET', '/x/0'));
  });

  it('agrees with a direct reading of the patterns on random paths', () => {
    const patterns = ['/a/*', 'GET /a/:x', 'POST /a/b/c', '/:x/b', '/*', 'DELETE /c/:y/d', '/a'];
    const rules = patterns.map((p, i) => rule(`r${i}`, p));
    const m = compileMatcher(rules);
    const naive = (method: string, path: string): string[] => {
      const segs = path === '/' ? [] : path.slice(1).split('/');
      return rules
        .filter(({ patterns: [p = ''] }) => {
          const [pm, pp = ''] = p.includes(' ') ? p.split(' ') : [null, p];
          if (pm !== null && pm !== method && !(pm === 'GET' && method === 'HEAD')) return false;
          const ps = pp === '/' ? [] : pp.slice(1).split('/');
          if (ps.at(-1) === '*')
            return ps.slice(0, -1).every((s, i) => segs[i] !== undefined && (s.startsWith(':') || s === segs[i]));
          return ps.length === segs.length && ps.every((s, i) => s.startsWith(':') || s === segs[i]);
        })
        .map((r) => r.name);
    };
    const path = fc
      .array(fc.constantFrom('a', 'b', 'c', 'd', 'ab', 'aa'), { maxLength: 4 })
      .map((s) => `/${s.join('/')}`);
    fc.assert(
      fc.property(fc.constantFrom('GET', 'HEAD', 'POST', 'DELETE'), path, (method, p) => {
        expect(m.match(method, p).map((r) => r.name)).toEqual(naive(method, p));
      }),
    );
  });
});

describe('compileMatcher', () => {
  it('throws on a pattern the loader would have refused', () => {
    expect(() => compileMatcher([rule('bad', '/a/*/b')])).toThrow(
      'invalid pattern "/a/*/b": "*" is only allowed as the last segment, in "/a/*/b"',
    );
  });
});

describe("Rails' optional (.:format)", () => {
  const m = matcherOf(
    rule('resets', 'POST /auth/password(.:format)'),
    rule('show', 'GET /api/v1/statuses/:id(.:format)'),
    rule('auth', 'POST /auth(.:format)'),
  );
  const hit = m;

  it('matches the path without a format and with any one format', () => {
    expect(hit('POST', '/auth/password')).toEqual(['resets']);
    expect(hit('POST', '/auth/password.json')).toEqual(['resets']);
    expect(hit('POST', '/auth/password.html')).toEqual(['resets']);
    expect(hit('POST', '/auth.json')).toEqual(['auth']);
    expect(hit('GET', '/api/v1/statuses/12.json')).toEqual(['show']);
  });

  it('does not match an empty format, an empty stem, another segment or a longer name', () => {
    expect(hit('POST', '/auth/password.')).toEqual([]);
    expect(hit('POST', '/auth/.json')).toEqual([]);
    expect(hit('POST', '/auth/password.json/x')).toEqual([]);
    expect(hit('POST', '/auth/passwords.json')).toEqual([]);
    expect(hit('POST', '/auth/password/edit')).toEqual([]);
  });

  it('a rule without (.:format) still does not match a formatted path', () => {
    const plain = matcherOf(rule('sign-up', 'POST /api/v1/accounts'));
    expect(plain('POST', '/api/v1/accounts.json')).toEqual([]);
  });
});

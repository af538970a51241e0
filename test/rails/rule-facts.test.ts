/** What a request offers the rules: parameters in bracket notation, headers, paging queries, the token. */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { RequestFacts, whenFails } from '../../src/rails/rule-facts.js';
import { QueryParams } from '../../src/rails/request-params.js';
import { tokenDigest } from '../../src/identity/index.js';
import type { CompiledRule } from '../../src/config/types.js';
import { keyFacts } from '../support/key-facts.js';

const snap = parseConfig(
  `limits:
  - { name: email, match: /*, per: "param:user[email]", limit: 5, period: 1m }
  - { name: app, match: /*, per: "header:X-App", limit: 5, period: 1m }
  - { name: tok, match: /*, per: token, limit: 5, period: 1m }
  - { name: paging, match: /*, per: ip, when: { authenticated: false, query: [page, max_id] }, limit: 5, period: 1m }
`,
  't.yaml',
);
const [email, app, tok, paging] = snap.rules as [
  (typeof snap.rules)[0],
  (typeof snap.rules)[0],
  (typeof snap.rules)[0],
  (typeof snap.rules)[0],
];
const tokens = new WeakMap<RequestFacts, string>();
const facts = (
  query: string,
  headers: Record<string, string> = {},
  body = new Map<string, string>(),
  token: string | null = null,
) => {
  const f = new RequestFacts(headers, new QueryParams(query.replace(/^\?/, '')), body);
  if (token !== null) tokens.set(f, token);
  return f;
};
/** The digest a rule's key gives for these facts (null: no key), as the request path reads it (keys/kinds.ts). */
const ruleValueDigest = (rule: CompiledRule, f: RequestFacts): string | null => {
  const token = tokens.get(f);
  const tag = rule.key.tag(
    keyFacts(
      { token: token ?? null },
      { header: (n) => f.header(n), cookie: (n) => f.cookie(n), param: (n, p) => f.param(n, p) },
    ),
  );
  return tag === null ? null : tag.slice(tag.indexOf(':') + 1);
};

describe('request facts', () => {
  it('reads a bracket-notation parameter from the query, trimmed, then from the body; digests it', () => {
    expect(ruleValueDigest(email, facts('?user%5Bemail%5D=%20a%40example.com%20'))).toBe(tokenDigest('a@example.com'));
    expect(ruleValueDigest(email, facts('', {}, new Map([['user[email]', ' a@example.com']])))).toBe(
      tokenDigest('a@example.com'),
    );
    // The query wins over the body, as in Rails' params.
    expect(
      ruleValueDigest(email, facts('?user[email]=q@example.com', {}, new Map([['user[email]', 'b@example.com']]))),
    ).toBe(tokenDigest('q@example.com'));
  });

  it('gives no key for a blank value, an array or a hash where one value is named', () => {
    for (const q of [
      '',
      '?user[email]=',
      '?user[email]=%20%20',
      '?user[email][]=a',
      '?user[email][x]=a',
      '?user=a',
      '?email=a',
    ]) {
      expect(ruleValueDigest(email, facts(q)), q).toBeNull();
    }
  });

  it('keys a header by its trimmed first value and a token by its digest', () => {
    expect(ruleValueDigest(app, facts('', { 'x-app': ' one ' }))).toBe(tokenDigest('one'));
    expect(ruleValueDigest(app, facts('', { 'x-app': '  ' }))).toBeNull();
    expect(ruleValueDigest(tok, facts('', {}, undefined, 'secret'))).toBe(tokenDigest('secret'));
    expect(ruleValueDigest(tok, facts(''))).toBeNull();
  });

  it('holds when.query for any listed parameter present and not blank, and when.authenticated as given', () => {
    expect(whenFails(paging, facts('?page=2'), false)).toBeNull();
    expect(whenFails(paging, facts('?x=1&max_id=9'), false)).toBeNull();
    expect(whenFails(paging, facts('?page=&max_id=%20'), false)).toBe(
      'when.query: none of page, max_id is in the query string or a form body',
    );
    expect(whenFails(paging, facts('?page=2'), true)).toBe('when.authenticated: false, and the request has an account');
    // Rack's params merge a form body (a GET's too): a paging name there holds when.query.
    const fromBody = (form: Map<string, string>) => new RequestFacts({}, new QueryParams(''), new Map(), form);
    expect(whenFails(paging, fromBody(new Map([['max_id', '9']])), false)).toBeNull();
    expect(whenFails(paging, fromBody(new Map([['max_id', ' ']])), false)).not.toBeNull();
  });

  it('finds a query Rails would refuse unreadable, and reads no value from it', () => {
    const f = facts('?user=b&user[email]=a');
    expect(f.queryReadable()).toBe(false);
    expect(ruleValueDigest(email, f)).toBeNull();
    expect(facts('?page=1').queryReadable()).toBe(true);
  });
});

/** @module bucketsFor (pipeline/policy.ts): which buckets a request is charged in, and under which rule. */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { bucketsFor, buildRequestPolicy, rememberRefused } from '../../src/pipeline/policy.js';
import { RequestView } from '../../src/pipeline/request-view.js';
import { RECENT_BUCKETS } from '../../src/pipeline/recent-buckets.js';

const policy = buildRequestPolicy(
  parseConfig(
    `limits:
  - { name: by-ip, match: /api/*, per: ip, limit: 10, period: 1m, overrides: [{ ips: [192.0.2.0/24], limit: 100 }] }
  - { name: by-account, match: /api/*, per: account, limit: 20, period: 1m }
  - { name: anon, match: /api/*, when: { authenticated: false }, per: ip, limit: 3, period: 1m }
  - { name: by-app, match: /api/*, per: "header:X-App-Id", limit: 5, period: 1m }
`,
    't.yaml',
  ),
  async () => ({ kind: 'anonymous' }),
);
const rules = policy.snapshot.rules;
/** A request from `ip` with these headers and account (null: none). */
const who = (o: { ip?: string; account?: string | null; headers?: Record<string, string> }): RequestView => {
  const v = new RequestView(
    { method: 'GET', url: '/api/x', headers: o.headers ?? {}, rawHeaders: [] },
    policy,
    policy.resolveIp.peer(o.ip ?? '198.51.100.1'),
  );
  v.account = o.account ?? null;
  return v;
};
const names = (r: { rules: readonly { name: string; limit: number }[] }) => r.rules.map((x) => `${x.name}:${x.limit}`);

describe('bucketsFor', () => {
  it('charges an anonymous client per IP, in the anonymous rule, and skips account and absent-header rules', () => {
    const r = bucketsFor(policy, rules, who({}));
    expect(names(r)).toEqual(['by-ip:10', 'anon:3']);
    expect(r.specs).toHaveLength(2);
    expect(new Set(r.specs.map((s) => s.key)).size).toBe(2);
  });

  it('charges a signed-in client per account too, not in the anonymous rule, and per header value when sent', () => {
    const r = bucketsFor(policy, rules, who({ account: 'a:42', headers: { 'x-app-id': 'app-1' } }));
    expect(names(r)).toEqual(['by-ip:10', 'by-account:20', 'by-app:5']);
  });

  it('leaves out the rules that need the account while it is not known yet (the early refusal), when.authenticated included', () => {
    const r = bucketsFor(policy, rules, who({}), false);
    expect(names(r)).toEqual(['by-ip:10']);
  });

  it('counts a client an override names under the override’s limit, in a bucket of its own', () => {
    const plain = bucketsFor(policy, rules, who({}));
    const named = bucketsFor(policy, rules, who({ ip: '192.0.2.7' }));
    expect(names(named)[0]).toBe('by-ip:100');
    expect(named.specs[0]!.key).not.toBe(plain.specs[0]!.key);
  });

  it('gives a client seen again the same buckets, reused, and each other client its own', () => {
    const a = { account: 'a:42', headers: { 'x-app-id': 'app-1' } };
    const first = bucketsFor(policy, rules, who(a));
    const again = bucketsFor(policy, rules, who(a));
    // Reused: no key string is built for a client seen last (the stores hash a fresh one on each look-up).
    again.specs.forEach((s, i) => expect(s).toBe(first.specs[i]));
    const other = bucketsFor(
      policy,
      rules,
      who({ ip: '198.51.100.2', account: 'a:43', headers: { 'x-app-id': 'app-2' } }),
    );
    expect(other.specs.map((s) => s.key).slice(0, 2)).toEqual(['by-ip:{ip:198.51.100.2}', 'by-account:{acct:a:43}']);
    other.specs.forEach((s, i) => expect(s.key).not.toBe(first.specs[i]!.key));
    // The same IP under an override, then without: each time its own rule's bucket.
    const named = bucketsFor(policy, rules, who({ ip: '192.0.2.7' }));
    const plain = bucketsFor(policy, rules, who({ ip: '192.0.2.7', account: 'a:42' }));
    expect([named.specs[0]!.limit, plain.specs[0]!.limit]).toEqual([100, 100]);
    expect(bucketsFor(policy, rules, who({})).specs[0]).toMatchObject({ key: first.specs[0]!.key, limit: 10 });
  });

  it('gives refused clients taking turns their buckets again, reused, up to RECENT_BUCKETS for the table', () => {
    const ip = (i: number): string => `198.51.${100 + (i >> 8)}.${i & 255}`;
    const first = [0, 1, 2].map((i) => bucketsFor(policy, rules, who({ ip: ip(i) })));
    // Not refused: built again (equal, not the same), since only refusals are remembered.
    bucketsFor(policy, rules, who({ ip: ip(9) }));
    expect(bucketsFor(policy, rules, who({ ip: ip(0) })).specs[0]).not.toBe(first[0]!.specs[0]);
    // Each refused as it is decided (decide.ts), so the rule's last bucket is the request's own.
    const refused = [0, 1, 2].map((i) => {
      const b = bucketsFor(policy, rules, who({ ip: ip(i) }));
      rememberRefused(policy, b);
      return b;
    });
    const turn = [0, 1, 2].map((i) => bucketsFor(policy, rules, who({ ip: ip(i) })));
    turn.forEach((b, i) => b.specs.forEach((s, j) => expect(s).toBe(refused[i]!.specs[j])));
    expect(turn.map((b) => b.specs[0]!.key)).toEqual([0, 1, 2].map((i) => `by-ip:{ip:${ip(i)}}`));
    // A request decided after another began (a store wait between): nothing of the other's is kept for it.
    const waited = bucketsFor(policy, rules, who({ ip: ip(7) }));
    bucketsFor(policy, rules, who({ ip: ip(8) }));
    rememberRefused(policy, waited);
    bucketsFor(policy, rules, who({ ip: ip(9) }));
    expect(bucketsFor(policy, rules, who({ ip: ip(7) })).specs[0]).not.toBe(waited.specs[0]);
    // Past the bound every rule's memo is emptied (built afresh, equal but not the same): memory stays bounded.
    for (let i = 10; i < RECENT_BUCKETS + 10; i++)
      rememberRefused(policy, bucketsFor(policy, rules, who({ ip: ip(i) })));
    bucketsFor(policy, rules, who({ ip: ip(9) }));
    const later = bucketsFor(policy, rules, who({ ip: ip(0) })).specs[0]!;
    expect(later).not.toBe(refused[0]!.specs[0]);
    expect(later).toEqual(refused[0]!.specs[0]);
  });
});

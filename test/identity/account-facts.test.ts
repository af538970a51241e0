import { describe, expect, it } from 'vitest';
import { accountConditionFails, factsOf, UNKNOWN_FACTS } from '../../src/identity/account-facts.js';
import { createAccountResolver } from '../../src/identity/account.js';

const DAY = 86_400_000;
const NOW = Date.UTC(2026, 10, 27);

describe('account facts', () => {
  it('reads created_at, bot and locked from an Account entity; anything else is unknown', () => {
    expect(factsOf({ id: '1', created_at: '2026-11-20T00:00:00.000Z', bot: true, locked: false })).toEqual({
      createdAt: Date.UTC(2026, 10, 20),
      bot: true,
      locked: false,
    });
    expect(factsOf({ id: '1', created_at: 'yesterday', bot: 'yes', locked: 1 })).toEqual(UNKNOWN_FACTS);
  });

  it('tests when.account: no account never matches, an unknown age counts as new, unknown flags as false', () => {
    const young = { op: '<' as const, ms: 7 * DAY, text: '< 7d' };
    const old = { op: '>=' as const, ms: 30 * DAY, text: '>= 30d' };
    const facts = { createdAt: NOW - 3 * DAY, bot: false, locked: null };
    expect(accountConditionFails({ age: young }, null, null, NOW)).toBe('when.account: the request has no account');
    expect(accountConditionFails({ age: young }, 'a:1', facts, NOW)).toBeNull();
    expect(accountConditionFails({ age: old }, 'a:1', facts, NOW)).toBe(
      'when.account.age: the account is 3d old, not >= 30d',
    );
    expect(accountConditionFails({ age: young }, 't:ab', null, NOW)).toBeNull();
    expect(accountConditionFails({ age: old }, 't:ab', null, NOW)).toMatch(/unknown age \(counted as new\)/);
    expect(accountConditionFails({ locked: false }, 'a:1', facts, NOW)).toBeNull();
    expect(accountConditionFails({ bot: true }, 'a:1', facts, NOW)).toBe('when.account.bot: the account is not a bot');
  });

  it('keeps the facts of the last introspection per account, and none in token mode', async () => {
    let createdAt = NOW - DAY;
    const resolver = createAccountResolver({
      from: 'introspect',
      cacheTtlMs: 0,
      introspect: async () => ({ kind: 'account', id: '7', facts: { createdAt, bot: false, locked: true } }),
    });
    expect(await resolver.resolve('tok1', undefined, false)).toBe('a:7');
    expect(resolver.facts('a:7')).toEqual({ createdAt: NOW - DAY, bot: false, locked: true });
    createdAt = NOW - 2 * DAY;
    await resolver.resolve('tok2', undefined, false);
    expect(resolver.facts('a:7')?.createdAt).toBe(NOW - 2 * DAY);
    expect(createAccountResolver({ from: 'token' }).facts('t:ab')).toBeUndefined();
  });
});

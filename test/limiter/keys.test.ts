import { describe, expect, it } from 'vitest';
import { bucketKey, ruleKeyPrefix } from '../../src/limiter/keys.js';
import { keySlot } from '../../src/limiter/redis/slot.js';
import { compileKey } from '../../src/keys/index.js';
import { knownClient } from '../../src/pipeline/rule-inputs.js';

const client = knownClient({ address: '203.0.113.7', key: '203.0.113.7' }, 'a:42');
const tag = (per: string) => compileKey(per).tag(client)!;

describe('bucket keys', () => {
  it('tag each identity so that all of its buckets fall in one Redis Cluster slot', () => {
    const a = bucketKey(ruleKeyPrefix('sign-up'), tag('ip'));
    const b = bucketKey(ruleKeyPrefix('api'), tag('ip'));
    expect([a, b]).toEqual(['sign-up:{ip:203.0.113.7}', 'api:{ip:203.0.113.7}']);
    expect(keySlot(a)).toBe(keySlot(b));
    const c = bucketKey(ruleKeyPrefix('posts'), tag('account'));
    const d = bucketKey(ruleKeyPrefix('media'), tag('account'));
    expect([c, d]).toEqual(['posts:{acct:a:42}', 'media:{acct:a:42}']);
    expect(keySlot(c)).toBe(keySlot(d));
    expect(bucketKey(ruleKeyPrefix('all'), tag('global'))).toBe('all:{global}');
  });

  it('give no key to a per-account rule for a request without an account (the rule is skipped)', () => {
    expect(compileKey('account').tag(knownClient({ address: '203.0.113.7', key: '203.0.113.7' }))).toBeNull();
  });

  it('tag token, header and parameter keys by their digest, one identity in one slot whatever the rule', () => {
    const d = 'ab'.repeat(32);
    expect(bucketKey(ruleKeyPrefix('per-token'), `tok:${d}`)).toBe(`per-token:{tok:${d}}`);
    const resets = bucketKey(ruleKeyPrefix('resets'), `prm:${d}`);
    const logins = bucketKey(ruleKeyPrefix('logins'), `prm:${d}`);
    expect(resets).toBe(`resets:{prm:${d}}`);
    expect(keySlot(resets)).toBe(keySlot(logins));
    // Without the value, a keyed rule has no tag: it is skipped.
    for (const per of ['token', 'header:x-app', 'param:user[email]', 'cookie:sid', 'jwt:sub'])
      expect(compileKey(per).tag(client), per).toBeNull();
  });

  it("give an override its own bucket beside the rule's default one, in the same slot", () => {
    const plain = bucketKey(ruleKeyPrefix('api'), tag('ip'));
    const override = bucketKey(ruleKeyPrefix('api', 0), tag('ip'));
    expect(override).toBe('api:o0:{ip:203.0.113.7}');
    expect(override).not.toBe(plain);
    expect(keySlot(override)).toBe(keySlot(plain));
  });
});

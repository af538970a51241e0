import { describe, expect, it } from 'vitest';
import { bucketKey, ruleKeyPrefix } from '../../src/limiter/keys.js';
import { keySlot } from '../../src/limiter/redis/slot.js';

describe('bucket keys', () => {
  it('tag each identity so that all of its buckets fall in one Redis Cluster slot', () => {
    const a = bucketKey(ruleKeyPrefix('sign-up'), 'ip', '203.0.113.7', null)!;
    const b = bucketKey(ruleKeyPrefix('api'), 'ip', '203.0.113.7', null)!;
    expect([a, b]).toEqual(['sign-up:{ip:203.0.113.7}', 'api:{ip:203.0.113.7}']);
    expect(keySlot(a)).toBe(keySlot(b));
    const c = bucketKey(ruleKeyPrefix('posts'), 'account', '203.0.113.7', 'a:42')!;
    const d = bucketKey(ruleKeyPrefix('media'), 'account', '203.0.113.7', 'a:42')!;
    expect([c, d]).toEqual(['posts:{acct:a:42}', 'media:{acct:a:42}']);
    expect(keySlot(c)).toBe(keySlot(d));
    expect(bucketKey(ruleKeyPrefix('all'), 'global', '203.0.113.7', 'a:42')).toBe('all:{global}');
  });

  it('give no key to a per-account rule for a request without an account (the rule is skipped)', () => {
    expect(bucketKey(ruleKeyPrefix('posts'), 'account', '203.0.113.7', null)).toBeNull();
  });

  it('tag token, header and parameter keys by their digest, and skip the rule when the request has no value', () => {
    const d = 'ab'.repeat(32);
    expect(bucketKey(ruleKeyPrefix('per-token'), 'token', '203.0.113.7', null, d)).toBe(`per-token:{tok:${d}}`);
    expect(bucketKey(ruleKeyPrefix('app'), 'header', '203.0.113.7', null, d)).toBe(`app:{hdr:${d}}`);
    const resets = bucketKey(ruleKeyPrefix('resets'), 'param', '203.0.113.7', null, d)!;
    const logins = bucketKey(ruleKeyPrefix('logins'), 'param', '198.51.100.1', null, d)!;
    expect(resets).toBe(`resets:{prm:${d}}`);
    // One e-mail's buckets share a slot, whatever the rule.
    expect(keySlot(resets)).toBe(keySlot(logins));
    for (const per of ['token', 'header', 'param'] as const) expect(bucketKey(ruleKeyPrefix('r'), per, '203.0.113.7', 'a:1', null)).toBeNull();
  });

  it("give an override its own bucket beside the rule's default one, in the same slot", () => {
    const plain = bucketKey(ruleKeyPrefix('api'), 'ip', '203.0.113.7', null)!;
    const override = bucketKey(ruleKeyPrefix('api', 0), 'ip', '203.0.113.7', null)!;
    expect(override).toBe('api:o0:{ip:203.0.113.7}');
    expect(override).not.toBe(plain);
    expect(keySlot(override)).toBe(keySlot(plain));
  });
});

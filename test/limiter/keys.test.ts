import { describe, expect, it } from 'vitest';
import { bucketKey, ruleKeyPrefix } from '../../src/limiter/keys.js';
import { keySlot } from '../../src/limiter/slot.js';

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
});

/** RFC 7239 `Forwarded`: the `for=` nodes the trusted-proxy walk reads. */
import { describe, expect, it } from 'vitest';
import { forwardedForNodes } from '../../src/identity/forwarded.js';
import { compileCidrs } from '../../src/identity/cidr.js';
import { createClientIpResolver } from '../../src/identity/ip.js';

describe('forwardedForNodes', () => {
  it('reads the for= node of each element, in order, unquoting and ignoring other parameters and case', () => {
    expect(forwardedForNodes('for=192.0.2.60;proto=http;by=203.0.113.43')).toEqual(['192.0.2.60']);
    expect(forwardedForNodes('For="[2001:db8:cafe::17]:4711"')).toEqual(['[2001:db8:cafe::17]:4711']);
    expect(forwardedForNodes('for=192.0.2.43, for=198.51.100.17;proto=https')).toEqual(['192.0.2.43', '198.51.100.17']);
    expect(forwardedForNodes('proto=https;FOR = x')).toEqual([null]);
    expect(forwardedForNodes('for="192.0.2.43:47011" ,  for=unknown,for=_hidden')).toEqual([
      '192.0.2.43:47011',
      'unknown',
      '_hidden',
    ]);
    expect(forwardedForNodes('for="a\\"b"')).toEqual(['a"b']);
  });

  it('says nothing (null) for a header without any for=', () => {
    expect(forwardedForNodes('proto=https;host=example.org')).toBeNull();
    expect(forwardedForNodes('')).toBeNull();
    expect(forwardedForNodes(' , ')).toBeNull();
  });

  it('marks malformed elements, resyncing at the next comma, and an unterminated quote as the end', () => {
    expect(forwardedForNodes('garbage, for=192.0.2.1')).toEqual([null, '192.0.2.1']);
    expect(forwardedForNodes('for=1.2.3.4;for=5.6.7.8, for=192.0.2.1')).toEqual([null, '192.0.2.1']);
    expect(forwardedForNodes('for="1.2.3.4, for=192.0.2.1')).toEqual([null]);
    expect(forwardedForNodes('for=1.2.3.4 junk')).toEqual([null]);
    expect(forwardedForNodes('x'.repeat(5000))).toEqual([null]);
  });
});

describe('the client IP from Forwarded', () => {
  const resolve = createClientIpResolver({ trustedProxies: compileCidrs(['loopback', 'private']), ipv6Prefix: 64 });

  it('walks for= nodes right to left through trusted proxies, as X-Forwarded-For', () => {
    expect(resolve('127.0.0.1', undefined, 'for=198.51.100.7, for=10.1.2.3').address).toBe('198.51.100.7');
    expect(resolve('127.0.0.1', undefined, 'for=203.0.113.9, for=198.51.100.7, for=10.1.2.3').address).toBe(
      '198.51.100.7',
    );
    expect(resolve('127.0.0.1', undefined, 'for="[2001:db8:cafe::17]:4711"').key).toBe('2001:db8:cafe::/64');
    expect(resolve('127.0.0.1', undefined, 'for="198.51.100.7:8080"').address).toBe('198.51.100.7');
  });

  it('stops at unknown, obfuscated identifiers and garbage: the hop that passed them is the client', () => {
    expect(resolve('127.0.0.1', undefined, 'for=198.51.100.7, for=unknown').address).toBe('127.0.0.1');
    expect(resolve('127.0.0.1', undefined, 'for=198.51.100.7, for=_hidden, for=10.0.0.5').address).toBe('10.0.0.5');
    expect(resolve('127.0.0.1', undefined, 'for="198.51.100.7:_port"').address).toBe('127.0.0.1');
    expect(resolve('127.0.0.1', undefined, 'for=198.51.100.7, nonsense').address).toBe('127.0.0.1');
  });

  it('is ignored from an untrusted peer, and when X-Forwarded-For is present (X-Forwarded-For wins)', () => {
    expect(resolve('203.0.113.1', undefined, 'for=198.51.100.7').address).toBe('203.0.113.1');
    expect(resolve('127.0.0.1', '192.0.2.44', 'for=198.51.100.7').address).toBe('192.0.2.44');
  });

  it('falls back to the peer when the header names no for= node', () => {
    expect(resolve('127.0.0.1', undefined, 'proto=https').address).toBe('127.0.0.1');
  });
});

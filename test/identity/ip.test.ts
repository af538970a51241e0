import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileCidrs } from '../../src/identity/cidr.js';
import { bareForwardedAddress, createClientIpResolver, ipBucketKey, networkOf } from '../../src/identity/ip.js';

const trustedProxies = compileCidrs(['loopback', 'private']);
const resolve = createClientIpResolver({ trustedProxies, ipv6Prefix: 64 });
const key = (peer: string, xff?: string | string[]): string => resolve(peer, xff).key;

describe('client IP without a trusted proxy', () => {
  it('is the TCP peer when there is no X-Forwarded-For', () => {
    expect(resolve('203.0.113.7', undefined)).toEqual({ address: '203.0.113.7', key: '203.0.113.7' });
  });

  it('a client cannot choose its IP by sending X-Forwarded-For directly', () => {
    expect(key('203.0.113.7', '198.51.100.1')).toBe('203.0.113.7');
    expect(key('203.0.113.7', ['198.51.100.1', '198.51.100.2'])).toBe('203.0.113.7');
  });

  it('a client cannot claim a trusted address by sending X-Forwarded-For directly', () => {
    // An untrusted peer naming 127.0.0.1 must neither get that key nor have its header walked.
    expect(key('203.0.113.7', '127.0.0.1')).toBe('203.0.113.7');
    expect(key('203.0.113.7', '10.0.0.1, 127.0.0.1')).toBe('203.0.113.7');
  });

  it('folds an IPv4-mapped peer to its IPv4 address', () => {
    expect(resolve('::ffff:1.2.3.4', undefined)).toEqual({ address: '1.2.3.4', key: '1.2.3.4' });
  });

  it('a client on a dual-stack socket cannot get a second bucket by connecting over mapped IPv6', () => {
    expect(key('::ffff:203.0.113.7')).toBe(key('203.0.113.7'));
  });

  it('gives an unparsable or missing peer one shared "unknown" key and never trusts its header', () => {
    expect(key('', '198.51.100.1')).toBe('unknown');
    expect(resolve(undefined, '198.51.100.1').key).toBe('unknown');
  });

  for (let i = 0; i < 2; i++) {
    it(`answers the same from its cache on repeat lookups (round ${i + 1})`, () => {
      expect(key('127.0.0.1', '203.0.113.9')).toBe('203.0.113.9');
      expect(key('203.0.113.9', '1.1.1.1')).toBe('203.0.113.9');
    });
  }
});

describe('the X-Forwarded-For walk from a trusted peer', () => {
  it('takes the single hop added by one trusted proxy', () => {
    expect(key('127.0.0.1', '203.0.113.7')).toBe('203.0.113.7');
    expect(key('::ffff:10.0.0.5', '203.0.113.7')).toBe('203.0.113.7');
  });

  it('skips a chain of trusted proxies to the right-most untrusted address', () => {
    expect(key('10.0.0.2', '203.0.113.7, 10.0.0.9, 192.168.1.1')).toBe('203.0.113.7');
  });

  it('a client cannot choose its IP by prepending entries to X-Forwarded-For', () => {
    // The client wrote 1.1.1.1; the trusted proxy appended the real address it saw.
    expect(key('10.0.0.2', '1.1.1.1, 203.0.113.7')).toBe('203.0.113.7');
    expect(key('10.0.0.2', '1.1.1.1, 2.2.2.2, 203.0.113.7, 10.0.0.3')).toBe('203.0.113.7');
  });

  it('uses the left-most entry when every entry is trusted', () => {
    expect(key('127.0.0.1', '10.0.0.7, 10.0.0.8, 192.168.0.1')).toBe('10.0.0.7');
  });

  it('uses the peer when the header is empty', () => {
    expect(key('127.0.0.1', '')).toBe('127.0.0.1');
    expect(key('127.0.0.1', ' , ,')).toBe('127.0.0.1');
    expect(key('127.0.0.1', [])).toBe('127.0.0.1');
  });

  it('walks several X-Forwarded-For headers as one list joined in order', () => {
    expect(key('127.0.0.1', ['1.1.1.1, 203.0.113.7', '10.0.0.3'])).toBe('203.0.113.7');
    expect(key('127.0.0.1', ['203.0.113.7', '10.0.0.3, 10.0.0.4'])).toBe('203.0.113.7');
    expect(key('127.0.0.1', ['10.0.0.1', '10.0.0.2'])).toBe('10.0.0.1');
  });

  it('tolerates whitespace, IPv6 brackets and ports on entries', () => {
    expect(key('127.0.0.1', ' \t203.0.113.7:51234 ')).toBe('203.0.113.7');
    expect(key('127.0.0.1', '[2001:db8::7]:443')).toBe('2001:db8::/64');
    expect(key('127.0.0.1', '[2001:db8::7]')).toBe('2001:db8::/64');
    expect(key('127.0.0.1', '203.0.113.7, [::1]:8080, 10.0.0.1:80')).toBe('203.0.113.7');
  });

  it('garbage in X-Forwarded-For never becomes a key: the walk stops at the trusted hop that passed it', () => {
    expect(key('127.0.0.1', 'garbage')).toBe('127.0.0.1');
    expect(key('127.0.0.1', 'unknown, 10.0.0.5')).toBe('10.0.0.5');
    expect(key('127.0.0.1', '_hidden')).toBe('127.0.0.1');
  });

  it('a client cannot choose its IP by hiding behind a malformed X-Forwarded-For entry', () => {
    // Were garbage skipped, the walk would reach 1.1.1.1, which the client wrote itself.
    expect(key('10.0.0.2', '1.1.1.1, 300.1.1.1, 10.0.0.5')).toBe('10.0.0.5');
    expect(key('10.0.0.2', '1.1.1.1, 1.2.3.4:http')).toBe('10.0.0.2');
    expect(key('10.0.0.2', '1.1.1.1, [1.2.3.4]')).toBe('10.0.0.2');
    expect(key('10.0.0.2', '1.1.1.1, 0x7f.0.0.1')).toBe('10.0.0.2');
    expect(key('10.0.0.2', `1.1.1.1, ${'9'.repeat(5000)}`)).toBe('10.0.0.2');
  });

  it('returns the un-grouped client address beside the grouped key', () => {
    expect(resolve('127.0.0.1', '2001:db8:1:2:3:4:5:6')).toEqual({
      address: '2001:db8:1:2:3:4:5:6',
      key: '2001:db8:1:2::/64',
    });
    expect(resolve('127.0.0.1', '::ffff:198.51.100.3')).toEqual({ address: '198.51.100.3', key: '198.51.100.3' });
  });
});

describe('IPv6 grouping', () => {
  it('groups IPv6 clients by /64 by default', () => {
    expect(key('2001:db8:1:2::1')).toBe('2001:db8:1:2::/64');
    expect(key('2001:db8:1:2:ffff:ffff:ffff:ffff')).toBe('2001:db8:1:2::/64');
    expect(key('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
  });

  it('a client cannot get fresh buckets by rotating addresses inside its /64', () => {
    const keys = new Set(
      ['::1', '::2', '1:2:3:4', 'dead:beef:0:1'].map((s) => key(`2001:db8:aa:bb:${s}`.replace(':::', '::'))),
    );
    expect(keys).toEqual(new Set(['2001:db8:aa:bb::/64']));
  });

  it('gives every spelling of the same network the same key', () => {
    const spellings = [
      '2001:db8:0:0:1::1',
      '2001:DB8::1:0:0:1',
      '2001:0db8:0000:0000:0001:0000:0000:0001',
      '2001:db8::1:0:0:1%eth0',
    ];
    for (const s of spellings) expect(key(s), s).toBe('2001:db8::/64');
  });

  it('uses the configured prefix', () => {
    const at = (bits: number, addr: string): string =>
      createClientIpResolver({ trustedProxies, ipv6Prefix: bits })(addr, undefined).key;
    expect(at(48, '2001:db8:1:2::1')).toBe('2001:db8:1::/48');
    expect(at(56, '2001:db8:1:2ff::1')).toBe('2001:db8:1:200::/56');
    expect(at(60, '2001:db8:1:2ff::1')).toBe('2001:db8:1:2f0::/60');
    expect(at(128, '2001:db8::1')).toBe('2001:db8::1/128');
    expect(at(0, '2001:db8::1')).toBe('::/0');
  });

  it('keeps IPv4-mapped addresses as IPv4, whatever the prefix', () => {
    expect(key('::ffff:1.2.3.4')).toBe('1.2.3.4');
    expect(key('127.0.0.1', '::ffff:1.2.3.4')).toBe('1.2.3.4');
  });

  it('rejects a prefix outside 0–128', () => {
    expect(() => createClientIpResolver({ trustedProxies, ipv6Prefix: 129 })).toThrow(/ipv6Prefix/);
    expect(() => createClientIpResolver({ trustedProxies, ipv6Prefix: 6.5 })).toThrow(/ipv6Prefix/);
  });

  it('computes the same key for an address typed into the admin API', () => {
    expect(ipBucketKey('2001:DB8:1:2::99', 64)).toBe('2001:db8:1:2::/64');
    expect(ipBucketKey('::ffff:10.0.0.1', 64)).toBe('10.0.0.1');
    expect(ipBucketKey('nope', 64)).toBeNull();
  });
});

describe('bareForwardedAddress', () => {
  it('strips whitespace, brackets and ports, and flags malformed entries', () => {
    expect(bareForwardedAddress(' 1.2.3.4 ')).toBe('1.2.3.4');
    expect(bareForwardedAddress('1.2.3.4:80')).toBe('1.2.3.4');
    expect(bareForwardedAddress('[::1]:80')).toBe('::1');
    expect(bareForwardedAddress('::1')).toBe('::1');
    expect(bareForwardedAddress('  ')).toBe('');
    expect(bareForwardedAddress('[::1')).toBeNull();
    expect(bareForwardedAddress('[::1]x')).toBeNull();
    expect(bareForwardedAddress('1.2.3.4:')).toBeNull();
    expect(bareForwardedAddress('1.2.3.4:123456')).toBeNull();
  });
});

describe('properties', () => {
  const ipv4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((o) => o.join('.'));
  const ipv6 = fc.ipV6();
  const untrustedPeer = fc.oneof(ipv4, ipv6).filter((a) => !trustedProxies.contains(a));
  const anyXff = fc.oneof(
    fc.string(),
    fc.array(fc.oneof(ipv4, ipv6, fc.string()), { maxLength: 8 }).map((a) => a.join(', ')),
    fc.array(fc.string(), { maxLength: 4 }),
  );

  it('for any X-Forwarded-For from an untrusted peer, the key is the peer’s own key', () => {
    fc.assert(
      fc.property(untrustedPeer, anyXff, (peer, xff) => {
        expect(resolve(peer, xff)).toEqual(resolve(peer, undefined));
      }),
      { numRuns: 2000 },
    );
  });

  it('from a trusted peer, the key is the peer or an address that appears in X-Forwarded-For', () => {
    fc.assert(
      fc.property(fc.constantFrom('127.0.0.1', '10.1.1.1', '::1'), anyXff, (peer, xff) => {
        const k = resolve(peer, xff).key;
        const candidates = new Set([resolve(peer, undefined).key]);
        for (const v of typeof xff === 'string' ? [xff] : xff) {
          for (const part of v.split(',')) {
            const bare = bareForwardedAddress(part);
            const c = bare ? ipBucketKey(bare, 64) : null;
            if (c !== null) candidates.add(c);
          }
        }
        expect(candidates.has(k)).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('all spellings of one IPv6 address give one key', () => {
    fc.assert(
      fc.property(fc.array(fc.nat(0xffff), { minLength: 8, maxLength: 8 }), (parts) => {
        const long = parts.map((p) => p.toString(16).padStart(4, '0')).join(':');
        const short = parts.map((p) => p.toString(16).toUpperCase()).join(':');
        expect(key(short)).toBe(key(long));
      }),
    );
  });
});

describe('the network that holds a client address', () => {
  it('masks IPv4 and IPv6 to their prefixes, folds mapped IPv4 and spells IPv6 one way', () => {
    expect(networkOf('203.0.113.77', 24, 48)).toBe('203.0.113.0/24');
    expect(networkOf('203.0.113.77', 20, 48)).toBe('203.0.112.0/20');
    expect(networkOf('::ffff:203.0.113.77', 24, 48)).toBe('203.0.113.0/24');
    expect(networkOf('2001:DB8:AA00:AB12::1', 24, 48)).toBe('2001:db8:aa00::/48');
    expect(networkOf('2001:db8:aa00:abff::1', 24, 56)).toBe('2001:db8:aa00:ab00::/56');
    expect(networkOf('2001:db8:aa00:abff::1', 32, 128)).toBe('2001:db8:aa00:abff::1/128');
    expect(networkOf('203.0.113.77', 32, 48)).toBe('203.0.113.77/32');
  });

  it('is null for what is not an address', () => {
    for (const bad of ['', 'unknown', '127.1', '0x7f.0.0.1', '2001:db8::g']) expect(networkOf(bad, 24, 48)).toBeNull();
  });
});

describe('exempt.ips answered by the resolver', () => {
  const exemptIps = compileCidrs(['127.0.0.1', '2001:db8:e::/48']);
  const withExempt = createClientIpResolver({ trustedProxies, ipv6Prefix: 64, exemptIps });

  it('marks each client it parses as exempt or not, with the same parse (mapped IPv6 seen as IPv4)', () => {
    expect(withExempt('127.0.0.1', undefined).exempt).toBe(true);
    expect(withExempt('::ffff:127.0.0.1', undefined).exempt).toBe(true);
    expect(withExempt('2001:db8:e:1::5', undefined).exempt).toBe(true);
    expect(withExempt('2001:db8:f::5', undefined).exempt).toBe(false);
    expect(withExempt('203.0.113.9', undefined).exempt).toBe(false);
    // The client named behind a trusted proxy is the one asked about, not the proxy.
    expect(withExempt('10.0.0.1', '127.0.0.1').exempt).toBe(true);
  });

  it('leaves it undefined without an exempt list, so the reader looks it up itself', () => {
    expect(resolve('127.0.0.1', undefined).exempt).toBeUndefined();
  });
});

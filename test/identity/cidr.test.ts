import { checkIpOrCidr, checkTrustedProxy } from '../../src/config/fields/validators.js';
import { describe, expect, it } from 'vitest';
import { compileCidrs, parseIp } from '../../src/identity/cidr.js';

describe('compileCidrs', () => {
  it('treats a bare IPv4 address as a /32 and a bare IPv6 address as a /128', () => {
    const set = compileCidrs(['203.0.113.7', '2001:db8::1']);
    expect(set.contains('203.0.113.7')).toBe(true);
    expect(set.contains('203.0.113.8')).toBe(false);
    expect(set.contains('2001:db8::1')).toBe(true);
    expect(set.contains('2001:db8::2')).toBe(false);
  });

  it('matches addresses inside IPv4 and IPv6 CIDR ranges', () => {
    const set = compileCidrs(['198.51.100.0/24', '2001:db8:1::/48']);
    expect(set.contains('198.51.100.255')).toBe(true);
    expect(set.contains('198.51.101.0')).toBe(false);
    expect(set.contains('2001:db8:1:ffff::1')).toBe(true);
    expect(set.contains('2001:db8:2::1')).toBe(false);
  });

  it('expands the loopback alias to 127.0.0.0/8 and ::1', () => {
    const set = compileCidrs(['loopback']);
    expect(set.contains('127.0.0.1')).toBe(true);
    expect(set.contains('127.255.0.3')).toBe(true);
    expect(set.contains('::1')).toBe(true);
    expect(set.contains('::2')).toBe(false);
    expect(set.contains('10.0.0.1')).toBe(false);
  });

  it('expands the private alias to 10/8, 172.16/12, 192.168/16 and fc00::/7', () => {
    const set = compileCidrs(['private']);
    for (const a of ['10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', 'fc00::1', 'fdff:1::2']) {
      expect(set.contains(a), a).toBe(true);
    }
    for (const a of ['11.0.0.1', '172.32.0.1', '172.15.255.255', '192.169.0.1', 'fe00::1', '127.0.0.1']) {
      expect(set.contains(a), a).toBe(false);
    }
  });

  it('matches an IPv4-mapped IPv6 peer as its IPv4 form', () => {
    const set = compileCidrs(['loopback', 'private']);
    expect(set.contains('::ffff:10.0.0.1')).toBe(true);
    expect(set.contains('::ffff:127.0.0.1')).toBe(true);
    expect(set.contains('::FFFF:192.168.0.9')).toBe(true);
    expect(set.contains('::ffff:8.8.8.8')).toBe(false);
  });

  it('reads IPv4-mapped IPv6 entries as the IPv4 ranges they denote', () => {
    const set = compileCidrs(['::ffff:10.0.0.0/104', '::ffff:203.0.113.7']);
    expect(set.contains('10.9.9.9')).toBe(true);
    expect(set.contains('203.0.113.7')).toBe(true);
    expect(set.contains('11.0.0.1')).toBe(false);
  });

  it('lets ::/0 cover IPv4 peers too, since mapped peers are compared as IPv4', () => {
    const set = compileCidrs(['::/0']);
    expect(set.contains('2001:db8::1')).toBe(true);
    expect(set.contains('8.8.8.8')).toBe(true);
    expect(set.contains('::ffff:8.8.8.8')).toBe(true);
  });

  it('accepts a CIDR with host bits set as its network', () => {
    expect(compileCidrs(['10.0.0.1/8']).contains('10.200.0.1')).toBe(true);
  });

  it('throws an error naming the invalid entry', () => {
    for (const bad of ['10.0.0.0/33', '::/129', 'not-an-ip', '10.0.0', '1.2.3.4/', '1.2.3.4/-1', 'localhost', '']) {
      expect(() => compileCidrs(['loopback', bad]), bad).toThrow(`"${bad}"`);
    }
  });

  it('returns false from contains for unparsable strings instead of throwing', () => {
    const set = compileCidrs(['0.0.0.0/0', '::/0']);
    for (const s of ['', 'garbage', '1.2.3', '1.2.3.4:80', '[::1]', '300.1.1.1', '::g', '2001:db8::/64']) {
      expect(set.contains(s), s).toBe(false);
    }
  });

  it('gives the same answer from its cache on repeat lookups', () => {
    const set = compileCidrs(['private']);
    for (let i = 0; i < 3; i++) {
      expect(set.contains('10.0.0.1')).toBe(true);
      expect(set.contains('8.8.8.8')).toBe(false);
    }
  });

  it('reports an empty set as empty and matches nothing', () => {
    const set = compileCidrs([]);
    expect(set.empty).toBe(true);
    expect(set.contains('127.0.0.1')).toBe(false);
  });
});

describe('parseIp', () => {
  it('rejects non-canonical IPv4 spellings that other software reads differently', () => {
    // inet_aton accepts these; a proxy and rategate disagreeing about an address is a trust bypass.
    for (const s of ['127.1', '0x7f.0.0.1', '0177.0.0.1', '010.0.0.1', '2130706433', '1.2.3.4.5', '256.0.0.1']) {
      expect(parseIp(s), s).toBeNull();
    }
  });

  it('rejects a non-canonical IPv4 tail inside IPv6', () => {
    expect(parseIp('::ffff:0x7f.0.0.1')).toBeNull();
    expect(parseIp('::ffff:010.0.0.1')).toBeNull();
  });

  it('folds IPv4-mapped IPv6 to IPv4 and drops an IPv6 zone', () => {
    expect(parseIp('::ffff:1.2.3.4')?.toString()).toBe('1.2.3.4');
    expect(parseIp('::ffff:102:304')?.toString()).toBe('1.2.3.4');
    expect(parseIp('fe80::1%eth0')?.kind()).toBe('ipv6');
    expect(parseIp('fe80::1%br-1234_x')?.kind()).toBe('ipv6');
  });
});

describe('one CIDR parser for config validation and the request path', () => {
  const cases = [
    '10.0.0.0/8',
    '10.0.0.1/8',
    '127.1',
    '0x7f.0.0.1',
    '::ffff:10.0.0.0/104',
    '::/0',
    'fe80::1%eth0',
    '2001:db8::/129',
    '1.2.3.4/33',
    'loopback',
    'Private',
    'localhost',
    '1.2.3.4/ 8',
    '',
    '300.1.1.1',
    '2001:db8::1',
  ];
  it.each(cases)('the config accepts %j exactly when compileCidrs does', (entry) => {
    let compiles = true;
    try {
      compileCidrs([entry]);
    } catch {
      compiles = false;
    }
    expect(checkTrustedProxy(entry) === null).toBe(compiles);
  });
  it('exempt lists take addresses and ranges but not the aliases', () => {
    expect(checkIpOrCidr('10.0.0.0/8')).toBeNull();
    expect(checkIpOrCidr('loopback')).toBe('invalid IP address or CIDR "loopback"');
  });
});

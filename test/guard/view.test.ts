/** Pure logic of the local guard picture: the incremental CIDR index (against compileCidrs), the view's bans and expiries. */
import { describe, expect, it } from 'vitest';
import { compileCidrs } from '../../src/identity/index.js';
import { CidrIndex } from '../../src/guard/cidr-index.js';
import { GuardView } from '../../src/guard/view.js';
import type { GuardEntry } from '../../src/guard/entry.js';

/** A small deterministic generator, so that a failure can be replayed. */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 0x100000000;
}

describe('CidrIndex', () => {
  it('answers as compileCidrs does for random IPv4 and IPv6 entries and addresses', () => {
    const rnd = lcg(7);
    const byte = () => Math.floor(rnd() * 4); // few values: many hits
    const v4 = () => `10.${byte()}.${byte()}.${byte()}`;
    const v6 = () => `2001:db8:${byte()}:${byte()}::${byte()}`;
    const entries: string[] = [];
    for (let i = 0; i < 40; i++) {
      const six = rnd() < 0.4;
      const bits = six ? [128, 64, 48, 127][Math.floor(rnd() * 4)] : [32, 24, 16, 30][Math.floor(rnd() * 4)];
      entries.push(`${six ? v6() : v4()}${rnd() < 0.3 ? '' : `/${bits}`}`);
    }
    entries.push('::ffff:10.3.0.0/112', '::ffff:0:0/96');
    const index = new CidrIndex(() => 0);
    for (const e of entries) expect(index.set(e, Infinity)).toBe(true);
    const reference = compileCidrs(entries);
    for (let i = 0; i < 2_000; i++) {
      const addr = rnd() < 0.5 ? v4() : v6();
      expect(index.contains(addr), addr).toBe(reference.contains(addr));
    }
    // Mapped spellings of an IPv4 peer, and garbage.
    expect(index.contains('::ffff:10.3.2.1')).toBe(true);
    for (const bad of ['010.0.0.1', '10.0.0', 'nonsense', '', '10.0.0.256'])
      expect(index.contains(bad)).toBe(reference.contains(bad));
  });

  it('changes one entry at a time: removal, two entries naming one network, expiry without a sweep', () => {
    let now = 0;
    const index = new CidrIndex(() => now);
    index.set('192.0.2.0/24', 100);
    index.set('192.0.2.9/24', Infinity); // the same network, written another way
    expect(index.contains('192.0.2.200')).toBe(true);
    index.delete('192.0.2.9/24');
    expect(index.contains('192.0.2.200')).toBe(true);
    now = 100;
    expect(index.contains('192.0.2.200')).toBe(false);
    index.set('192.0.2.0/24', 200); // renewed
    expect(index.contains('192.0.2.200')).toBe(true);
    index.delete('192.0.2.0/24');
    expect(index.contains('192.0.2.200')).toBe(false);
    expect(index.size).toBe(0);
    expect(index.set('not-an-ip', 5)).toBe(false);
  });

  it('looks up in time independent of the number of entries', () => {
    const index = new CidrIndex(() => 0);
    for (let i = 0; i < 100_000; i++) index.set(`11.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, Infinity);
    expect(index.contains('11.1.134.159')).toBe(true);
    expect(index.contains('12.0.0.1')).toBe(false);
    // One prefix length in use: one probe per lookup, whatever the size.
    expect((index as unknown as { v4: { lengths: number[] } }).v4.lengths).toEqual([32]);
  });
});

const ban = (id: string, expiresAt: number): GuardEntry => ({ kind: 'ban', id, reason: '', createdAt: 0, expiresAt });

describe('GuardView', () => {
  it('keeps an IP banned while another ban still holds it', () => {
    const v = new GuardView(() => 0);
    v.put(ban('a/ip:1.2.3.4', 100));
    v.put(ban('b/ip:1.2.3.4', 200));
    v.remove('ban|b/ip:1.2.3.4');
    expect(v.ipBans.get('ip:1.2.3.4')).toEqual({ ban: 'a', expiresAt: 100 });
    v.put(ban('b/ip:1.2.3.4', 200));
    v.remove('ban|a/ip:1.2.3.4');
    expect(v.ipBans.get('ip:1.2.3.4')).toEqual({ ban: 'b', expiresAt: 200 });
    v.remove('ban|b/ip:1.2.3.4');
    expect(v.ipBans.size).toBe(0);
    expect(v.byBan.size).toBe(0);
  });

  it('drops expired entries from memory on prune, and an entry replaced keeps its new expiry', () => {
    const v = new GuardView(() => 0);
    for (let i = 0; i < 10; i++) v.put(ban(`a/ip:10.0.0.${i}`, 100 + i));
    v.put({ kind: 'block', id: '192.0.2.1', reason: '', createdAt: 0, expiresAt: 105 });
    v.put({ kind: 'block', id: '192.0.2.1', reason: '', createdAt: 0, expiresAt: 1_000 });
    v.put({ kind: 'exempt', id: '198.51.100.0/24', reason: '', createdAt: 0, expiresAt: null });
    v.prune(105);
    expect(v.banCount('a')).toBe(4);
    expect(v.oldestBan('a')).toBe('ip:10.0.0.6');
    expect(v.blocks.size).toBe(1);
    v.prune(10_000);
    expect(v.size).toBe(1);
    expect(v.live(10_000).map((e) => e.id)).toEqual(['198.51.100.0/24']);
  });

  it('keeps the expiry heap bounded when the same entries are written again and again', () => {
    const v = new GuardView(() => 0);
    for (let i = 0; i < 50_000; i++) v.put(ban(`a/ip:10.0.0.${i % 10}`, 1_000_000 + i));
    expect(v.size).toBe(10);
    expect((v as unknown as { expiries: { size: number } }).expiries.size).toBeLessThan(2_100);
  });
});

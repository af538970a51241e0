import { describe, expect, it } from 'vitest';
import { BucketTable, ROW } from '../../src/limiter/memory/bucket-table.js';
import { MemoryStore } from '../../src/limiter/memory/store.js';
import { FakeClock } from '../support/clock.js';
import { seededRandom } from '../support/random.js';
import { bucketSpec } from '../support/buckets.js';

const rng = seededRandom;

/** Keys of every form the table packs differently, with near-misses of the packed forms. */
function keyOf(n: number): string {
  const a = n & 255;
  const b = (n >> 8) & 7;
  switch (n % 9) {
    case 0:
      return `ip-access:{ip:10.${b}.${a}.9}`;
    case 1:
      return `sign-up:{ip:10.${b}.${a}.9}`; // same IP, another prefix
    case 2:
      return `ip-access:{ip:10.${b}.0${a}.9}`; // leading zero: not canonical, packed as text
    case 3:
      return `ip-access:{ip:10.${b}.${a + 200}.9}`; // octets above 255 for most a
    case 4:
      return `account-access:{acct:a:${n % 5000}}`;
    case 5:
      return `ip-access:{ip:2001:db8:${b}:${a}::/64}`; // too long to pack
    case 6:
      return `k${n % 3000}`; // no brace
    case 7:
      return `ü-rule:{acct:h:é${a}}`; // non-ASCII tail
    default:
      return `ip-access:{ip:10.${b}.${a}.9}x`; // a packed form with a trailing extra
  }
}

describe('the bucket table', () => {
  it('agrees with a Map over random inserts, lookups and removals of keys of every form', () => {
    const random = rng(7);
    const table = new BucketTable();
    const model = new Map<string, number>();
    for (let step = 0; step < 60_000; step++) {
      const key = keyOf(Math.floor(random() * 20_000));
      const op = random();
      if (op < 0.5) {
        const r = table.insert(key);
        if (!model.has(key)) table.state[r * ROW] = step;
        model.set(key, table.state[r * ROW]!);
      } else if (op < 0.8) {
        const r = table.find(key);
        expect(r >= 0).toBe(model.has(key));
        if (r >= 0) expect(table.state[r * ROW]).toBe(model.get(key));
      } else {
        const r = table.find(key);
        if (r >= 0) table.remove(r);
        model.delete(key);
      }
      expect(table.size).toBe(model.size);
    }
    for (const [key, v] of model) expect(table.state[table.find(key) * ROW]).toBe(v);
  });

  it('tells apart keys that differ only in the prefix, a leading zero or a trailing character', () => {
    const table = new BucketTable();
    const keys = [
      'a:{ip:1.2.3.4}',
      'b:{ip:1.2.3.4}',
      'a:{ip:1.2.3.04}',
      'a:{ip:1.2.3.4}x',
      'a:{ip:1.2.3.45}',
      'a{ip:1.2.3.4}',
      '{ip:1.2.3.4}',
      'a:{ip:1.2.3.4',
    ];
    keys.forEach((k, i) => (table.state[table.insert(k) * ROW] = i + 1));
    expect(table.size).toBe(keys.length);
    keys.forEach((k, i) => expect(table.state[table.find(k) * ROW]).toBe(i + 1));
    expect(table.find('a:{ip:1.2.3.5}')).toBe(-1);
  });

  it('keeps the buckets of many rules apart, beyond the prefixes it finds without a lookup', () => {
    const table = new BucketTable();
    const keys = Array.from({ length: 40 }, (_, i) => `rule-${i}:{ip:192.0.2.1}`);
    keys.forEach((k, i) => (table.state[table.insert(k) * ROW] = i + 1));
    expect(table.size).toBe(40);
    keys.forEach((k, i) => expect(table.state[table.find(k) * ROW]).toBe(i + 1));
    expect(table.find('rule-40:{ip:192.0.2.1}')).toBe(-1);
    expect(table.find('rule-1:{ip:192.0.2.2}')).toBe(-1);
  });

  it('gives the memory back when the clients of a busy period have expired', () => {
    const clock = new FakeClock();
    const store = new MemoryStore({ now: clock.now, sweepIntervalMs: 0 });
    const spec = (i: number) =>
      bucketSpec(`ip-access:{ip:10.${(i >> 8) & 255}.${i & 255}.1}`, { limit: 5, periodMs: 1000 });
    for (let i = 0; i < 50_000; i++) store.consumeSync([spec(i)]);
    const table = (store as unknown as { table: { state: Float64Array } }).table;
    const grown = table.state.length;
    clock.advance(1000);
    store.sweepStep();
    store.sweepStep();
    store.sweepStep();
    expect(store.size).toBe(0);
    expect(table.state.length).toBeLessThan(grown / 16);
    // And it still counts afterwards.
    expect(store.consumeSync([spec(1)]).buckets[0]!.remaining).toBe(4);
    expect(store.consumeSync([spec(1)]).buckets[0]!.remaining).toBe(3);
  });
});

/**
 * The memory store's bound on live buckets (store.maxKeys): full, it refuses requests that need a new
 * bucket (429, retry in 1 s) and never admits a tracked key past its limit; keys the client chooses get
 * 90 % of the room, IPv4, account and global keys the rest; through the gateway, client-chosen cookie
 * and header values no longer grow the store without bound, and the count is a gauge.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../src/limiter/memory/store.js';
import { BucketTable } from '../../src/limiter/memory/bucket-table.js';
import type { BucketSpec } from '../../src/limiter/types.js';
import { gatewayFixture, startTestGateway } from '../support/gateway.js';
import { scaledMs } from '../support/speed.js';

const digest = (v: string) => createHash('sha256').update(v).digest('hex');
const spec = (key: string, limit = 5, shadow = false): BucketSpec => ({
  key,
  limit,
  periodMs: 60_000,
  algorithm: 'fixed-window',
  cost: 1,
  shadow,
  onError: 'local',
});
const cookie = (i: number) => spec(`per-session:{ck:${digest(`sid-${i}`)}}`);
const ipv4 = (i: number) => spec(`ip-access:{ip:10.0.${i >> 8}.${i & 255}}`);

describe('a full memory store', () => {
  it('refuses new client-chosen keys past 90 % of maxKeys, keeps the rest for IPv4 keys, and never lets a tracked key past its limit', () => {
    let now = 1_000;
    const full: string[] = [];
    const store = new MemoryStore({ now: () => now, maxKeys: 1_000, sweepIntervalMs: 0, onFull: (k) => full.push(k) });
    const tracked = cookie(-1);
    expect(store.consumeSync([tracked]).allowed).toBe(true);
    let admitted = 0;
    for (let i = 0; i < 2_000; i++) if (store.consumeSync([cookie(i)]).allowed) admitted++;
    expect(store.size).toBe(900);
    expect(admitted).toBe(899);
    expect(full).toHaveLength(1_101);
    const refused = store.consumeSync([cookie(5_000)]);
    expect(refused).toMatchObject({ allowed: false, buckets: [{ limited: true, remaining: 0, retryAt: now + 1_000 }] });
    // The tracked key keeps counting, exactly: 4 more, then limited.
    const more = Array.from({ length: 6 }, () => store.consumeSync([tracked]).allowed);
    expect(more).toEqual([true, true, true, true, false, false]);
    // IPv4 clients still get buckets, up to maxKeys, then they too are refused.
    const ips = Array.from({ length: 150 }, (_, i) => store.consumeSync([ipv4(i)]).allowed);
    expect(ips.filter(Boolean)).toHaveLength(100);
    expect(store.size).toBe(1_000);
    // A request with one refused bucket is charged nowhere.
    const before = store.consumeSync([ipv4(0)]).buckets[0]!.remaining;
    expect(store.consumeSync([ipv4(0), cookie(7_000)]).allowed).toBe(false);
    expect(store.consumeSync([ipv4(0)]).buckets[0]!.remaining).toBe(before - 1);
    // Expired buckets make room (swept at once when the table is full).
    now += 61_000;
    expect(store.consumeSync([cookie(8_000)]).allowed).toBe(true);
    expect(store.size).toBeLessThan(10);
  });

  it('a shadow rule never refuses for want of room, and keeps no bucket then', () => {
    const store = new MemoryStore({ now: () => 1_000, maxKeys: 10, sweepIntervalMs: 0 });
    for (let i = 0; i < 9; i++) store.consumeSync([cookie(i)]);
    const r = store.consumeSync([spec(`shadowed:{ck:${digest('x')}}`, 5, true), ipv4(1)]);
    expect(r.allowed).toBe(true);
    expect(r.buckets[0]).toMatchObject({ limited: false, remaining: 4 });
    expect(store.size).toBe(10); // the IPv4 bucket, not the shadow one
  });

  it('packs digest keys into the row: no key string kept per client', () => {
    const table = new BucketTable();
    for (let i = 0; i < 1_000; i++) table.insert(`per-session:{ck:${digest(String(i))}}`);
    for (let i = 0; i < 1_000; i++) table.insert(`account:{acct:h:${digest(String(i))}}`);
    expect(table.size).toBe(2_000);
    expect((table as unknown as { longKeys: Map<number, string> }).longKeys.size).toBe(0);
    expect(table.find(`per-session:{ck:${digest('5')}}`)).toBeGreaterThanOrEqual(0);
    expect(table.find(`per-session:{hdr:${digest('5')}}`)).toBe(-1); // another kind: another prefix
    // Two digests that agree on their first 96 bits share a bucket (counted together, never more).
    const d = digest('y');
    const twin = d.slice(0, 24) + (d[24] === '0' ? '1' : '0') + d.slice(25);
    expect(table.find(`per-session:{ck:${twin}}`)).toBe(-1);
    const r = table.insert(`per-session:{ck:${d}}`);
    expect(table.find(`per-session:{ck:${twin}}`)).toBe(r);
  });
});

const fx = gatewayFixture({ graceMs: 200 });

describe('store.maxKeys through the gateway', () => {
  it(
    'per: cookie:sid and per: header:X-K rules with 3,000 distinct values hold at most maxKeys buckets, refuse the rest 429, and count them',
    async () => {
      fx.gw = await startTestGateway(
        `limits:
  - { name: per-session, match: /api/*, per: cookie:sid, limit: 100, period: 5m }
  - { name: per-key, match: /api/*, per: header:X-K, limit: 100, period: 5m }
  - { name: ip-access, match: /api/*, per: ip, limit: 100000, period: 5m }
store: { maxKeys: 2000 }
`,
        { upstream: fx.upstream.url },
      );
      const statuses = new Map<number, number>();
      let retryAfter: string | null = null;
      for (let i = 0; i < 3_000; i++) {
        const r = await fetch(`${fx.gw.url}/api/v1/timelines/home`, {
          headers: { cookie: `sid=s${i}`, 'x-k': `k${i}`, 'x-forwarded-for': '203.0.113.1' },
        });
        await r.arrayBuffer();
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        if (r.status === 429) retryAfter = r.headers.get('retry-after');
      }
      expect(statuses.get(200)).toBeGreaterThan(850);
      expect(statuses.get(429)).toBeGreaterThan(2_000);
      expect(retryAfter).toBe('1');
      expect(fx.gw.store.localKeys()).toBeLessThanOrEqual(2_000);
      const m = await (await fetch(`${fx.gw.adminUrl}/metrics`)).text();
      expect(Number(/^rategate_store_keys (\d+)/m.exec(m)![1])).toBeLessThanOrEqual(2_000);
      expect(Number(/^rategate_store_keys_refused_total (\d+)/m.exec(m)![1])).toBe(statuses.get(429));
      // A client of the reserved kinds still gets through.
      expect(
        (await fetch(`${fx.gw.url}/api/v1/timelines/home`, { headers: { 'x-forwarded-for': '198.51.100.1' } })).status,
      ).toBe(200);
    },
    scaledMs(60_000),
  );
});

/** Pure logic of the attack-day features: the triage sketch, key display, and the config sections' validation. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TopLimited } from '../../src/guard/top-keys.js';
import { displayKey } from '../../src/keys/index.js';
import { ConfigError, parseConfig } from '../../src/config/index.js';
import { MemoryGuardState } from '../../src/guard/state.js';

function errors(yaml: string): string[] {
  try {
    parseConfig(yaml, 'limits.yaml', {});
    return [];
  } catch (err) {
    if (err instanceof ConfigError)
      return err.errors.map((e) =>
        typeof e === 'string' ? e : `${(e as { path: string }).path}: ${(e as { message: string }).message}`,
      );
    throw err;
  }
}

describe('TopLimited (Space-Saving)', () => {
  it('finds the heavy hitter among many one-off keys, in bounded memory', () => {
    const t = new TopLimited({ capacity: 16, windowMs: 60_000, now: () => 0 });
    for (let i = 0; i < 10_000; i++) {
      t.add('r', `noise-${i}`);
      if (i % 4 === 0) t.add('r', 'abuser');
    }
    const top = t.top('r', 3);
    expect(top[0]!.key).toBe('abuser');
    // Never under-counted; over-counted by at most its error.
    expect(top[0]!.count).toBeGreaterThanOrEqual(2_500);
    expect(top[0]!.count - top[0]!.error).toBeLessThanOrEqual(2_500);
    expect(t.top('r', 100).length).toBeLessThanOrEqual(16);
  });

  it("keeps Space-Saving's guarantees over any stream: counts sum to the stream, never under-count, over-count by at most the error, and hold every key above n / capacity", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 40 }), { maxLength: 600 }), (stream) => {
        const capacity = 8;
        const t = new TopLimited({ capacity, now: () => 0 });
        const truth = new Map<string, number>();
        for (const x of stream) {
          t.add('r', `k${x}`);
          truth.set(`k${x}`, (truth.get(`k${x}`) ?? 0) + 1);
        }
        const top = t.top('r', capacity);
        expect(top.reduce((n, k) => n + k.count, 0)).toBe(stream.length);
        for (const k of top) {
          expect(k.count).toBeGreaterThanOrEqual(truth.get(k.key)!);
          expect(k.count - k.error).toBeLessThanOrEqual(truth.get(k.key)!);
        }
        for (const [key, n] of truth) if (n > stream.length / capacity) expect(top.map((k) => k.key)).toContain(key);
      }),
    );
  });

  it('forgets what is older than two windows', () => {
    let now = 0;
    const t = new TopLimited({ capacity: 8, windowMs: 1_000, now: () => now });
    t.add('r', 'old');
    now = 1_500;
    t.add('r', 'new');
    expect(
      t
        .top('r', 5)
        .map((k) => k.key)
        .sort(),
    ).toEqual(['new', 'old']);
    now = 3_200;
    expect(t.top('r', 5).map((k) => k.key)).toEqual(['new']);
    now = 10_000;
    expect(t.top('r', 5)).toEqual([]);
  });

  it('counts keys as the store names them and shows them as the operator reads them, merged when shown alike', () => {
    const t = new TopLimited({ capacity: 8, now: () => 0, display: displayKey });
    for (let i = 0; i < 3; i++) t.add('sign-up', 'sign-up:{ip:203.0.113.7}');
    t.add('sign-up', 'sign-up:o1:{ip:192.0.2.1}');
    // Two store keys an operator reads as one (a ban key and a bucket key of one client).
    t.add('sign-up', 'ip:203.0.113.7');
    expect(t.top('sign-up', 5)).toEqual([
      { key: '203.0.113.7', count: 4, error: 0 },
      { key: '192.0.2.1 (override 1)', count: 1, error: 0 },
    ]);
  });

  it('shows keys as the operator knows them', () => {
    expect(displayKey('ip-access:{ip:203.0.113.7}')).toBe('203.0.113.7');
    expect(displayKey('ip-access:{ip:2001:db8::/64}')).toBe('2001:db8::/64');
    expect(displayKey('account-access:{acct:a:42}')).toBe('account 42');
    expect(displayKey(`per-token:{tok:${'ab'.repeat(32)}}`)).toBe(`token ${'ab'.repeat(8)}`);
    expect(displayKey('sign-up:o1:{ip:192.0.2.1}')).toBe('192.0.2.1 (override 1)');
    expect(displayKey('all:{global}')).toBe('global');
    // Every kind of the table has its own words: a session cookie's digest is never shown raw (`ck:<hex>`).
    const d = 'cd'.repeat(32);
    expect(displayKey(`session:{ck:${d}}`)).toBe(`cookie ${'cd'.repeat(8)}`);
    expect(displayKey(`tenants:{jwt:${d}}`)).toBe(`jwt ${'cd'.repeat(8)}`);
    expect(displayKey(`logins:{prm:${d}}`)).toBe(`param ${'cd'.repeat(8)}`);
    expect(displayKey(`apps:{hdr:${d}}`)).toBe(`header ${'cd'.repeat(8)}`);
    expect(displayKey(`acct:t:${d}`)).toBe(`token ${'cd'.repeat(8)}`);
    // A ban key (no braces) reads the same.
    expect(displayKey('ip:203.0.113.9')).toBe('203.0.113.9');
  });
});

describe('MemoryGuardState bans', () => {
  it('bans at the limit within the period, not before, and the ban ends by itself', async () => {
    let now = 1_000;
    const s = new MemoryGuardState(() => now);
    const c = { id: 'b/ip:1.2.3.4', limit: 3, periodMs: 10_000, banMs: 5_000, reason: 'x', maxActive: 100 };
    expect(await s.countBan(c, now)).toBeNull();
    expect(await s.countBan(c, now)).toBeNull();
    now = 12_000; // the window passed: counting starts again
    expect(await s.countBan(c, now)).toBeNull();
    expect(await s.countBan(c, now)).toBeNull();
    expect(await s.countBan(c, now)).toMatchObject({
      entry: { kind: 'ban', id: 'b/ip:1.2.3.4', expiresAt: 17_000, who: 'ban b' },
      dropped: [],
    });
    expect(s.view.live(now).map((e) => e.id)).toEqual(['b/ip:1.2.3.4']);
    now = 17_000;
    expect(s.view.live(now)).toEqual([]);
    await s.sync();
    expect(s.view.size).toBe(0);
  });
});

describe('config: bans and concurrency', () => {
  it('accepts the SPEC examples', () => {
    expect(
      errors(`bans:
  - { name: login-failures, match: "POST /auth/sign_in(.:format)", per: ip, on: { status: [401, 422] }, limit: 10, period: 10m, ban: 1h }
concurrency:
  - { name: uploads, match: POST /api/v2/media, per: account, max: 2 }
  - { name: search, match: GET /api/v2/search, per: ip, max: 4, scope: store }
log: { client: digest }
`),
    ).toEqual([]);
  });

  it('reports every error with its place', () => {
    const e = errors(`bans:
  - { name: a, match: /x, per: ip, limit: 0, period: 1m, ban: 10ms, on: { status: [99] } }
  - { name: a, match: /y, per: bogus, limit: 1, period: 1m, ban: 1h, bantime: 1h }
concurrency:
  - { name: c, match: /z, per: ip, max: 2, scope: cluster }
log: { client: yes }
`).join('\n');
    expect(e).toMatch(/bans\[0\]\.limit/);
    expect(e).toMatch(/bans\[0\]\.ban: must be at least 1s/);
    expect(e).toMatch(/bans\[0\]\.on\.status\[0\]/);
    expect(e).toMatch(/bans\[1\]\.per/);
    expect(e).toMatch(/bans\[1\]\.bantime: unknown key/);
    expect(e).toMatch(/bans\[1\]\.name: duplicate name "a"/);
    expect(e).toMatch(/concurrency\[0\]\.scope/);
    expect(e).toMatch(/log\.client/);
  });
});

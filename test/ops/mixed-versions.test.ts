/**
 * Issue 29 item 12: two releases on one Redis during a rolling upgrade. The rule (limiter/store-format.ts):
 * releases with the same store format share their buckets, and a limit holds across both; a release
 * that changes the format bumps STORE_FORMAT, which then joins every key, so the two count apart rather
 * than misread each other. Here the previous release's store code (test/fixtures/previous-release,
 * exported from git by scripts/export-previous-store.sh) runs beside this one's on one real Redis.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KINDS, tagOf } from '../../src/keys/index.js';
import { bucketKey, ruleKeyPrefix } from '../../src/limiter/keys.js';
import { createRedisStore } from '../../src/limiter/redis/store.js';
import { formatPrefix, STORE_FORMAT } from '../../src/limiter/store-format.js';
import type { BucketSpec, Store } from '../../src/limiter/types.js';
import { skipRedis, startRedis, type RedisHandle } from '../support/redis.js';

const FIXTURE = new URL('../fixtures/previous-release/', import.meta.url);
/** The previous release's modules, loaded as they are (plain ESM, its own Lua scripts). */
const previous = {
  store: (await import(new URL('src/limiter/redis/store.js', FIXTURE).href)) as {
    createRedisStore: typeof createRedisStore;
  },
  keys: (await import(new URL('src/limiter/keys.js', FIXTURE).href)) as {
    bucketKey: (
      prefix: string,
      per: string,
      ipKey: string,
      accountKey: string | null,
      valueDigest?: string | null,
    ) => string | null;
    ruleKeyPrefix: typeof ruleKeyPrefix;
  },
};
/** The previous release's format: 1 (it predates the version; its factory passed store.prefix as it is). */
const PREVIOUS_FORMAT = 1;
const PREFIX = 'rategate';

/** This release's key of a one-part bucket: the kind's tag of the value (keys/kinds.ts). */
const keyOf = (prefix: string, kind: 'ip' | 'account' | 'global' | 'token', value: string): string =>
  bucketKey(prefix, tagOf(KINDS[kind], value));

const spec = (key: string, algorithm: BucketSpec['algorithm'], limit = 10): BucketSpec => ({
  key,
  limit,
  // An hour: the counts below are exact only within one window (the two releases' stores read Redis's clock).
  periodMs: 3_600_000,
  algorithm,
  cost: 1,
  shadow: false,
  onError: 'local',
});

describe.skipIf(skipRedis('the mixed-versions test'))('the previous release and this one on one Redis', () => {
  let redis: RedisHandle;
  const stores: Store[] = [];
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    for (const s of stores) await s.close();
    await redis?.stop();
  });
  /** Each release's store as its factory makes it for store.prefix PREFIX. */
  async function pair(format = STORE_FORMAT): Promise<{ old: Store; now: Store }> {
    const old = previous.store.createRedisStore({
      url: redis.url,
      prefix: formatPrefix(PREFIX, PREVIOUS_FORMAT),
      timeoutMs: 2_000,
    });
    const now = createRedisStore({ url: redis.url, prefix: formatPrefix(PREFIX, format), timeoutMs: 2_000 });
    stores.push(old, now);
    await Promise.all([old.ready(), now.ready()]);
    return { old, now };
  }

  it('names the commit it was exported from, and builds the keys this release builds', () => {
    expect(readFileSync(new URL('COMMIT', FIXTURE), 'utf8').trim()).toMatch(/^[0-9a-f]{40}$/);
    for (const per of ['ip', 'account', 'global', 'token'] as const) {
      const value = { ip: '203.0.113.7', account: 'acct-1', global: '', token: 'ab'.repeat(32) }[per];
      const old = previous.keys.bucketKey(
        previous.keys.ruleKeyPrefix('sign-up'),
        per,
        '203.0.113.7',
        'acct-1',
        'ab'.repeat(32),
      );
      expect(old).toBe(keyOf(ruleKeyPrefix('sign-up'), per, value));
      expect(previous.keys.ruleKeyPrefix('r', 2)).toBe(ruleKeyPrefix('r', 2));
    }
  });

  it.each(['fixed-window', 'sliding-window', 'token-bucket'] as const)(
    'shares %s buckets: requests alternating between the two releases are admitted up to the limit, and no further',
    async (algorithm) => {
      expect(STORE_FORMAT).toBe(PREVIOUS_FORMAT); // the same format: they must share (else see the last test)
      const { old, now } = await pair();
      const key = keyOf(ruleKeyPrefix(`mixed-${algorithm}`), 'ip', '203.0.113.7');
      const remaining: number[] = [];
      let admitted = 0;
      for (let i = 0; i < 14; i++) {
        const o = await (i % 2 === 0 ? old : now).consume([spec(key, algorithm)]);
        if (o.allowed) admitted++;
        remaining.push(o.buckets[0]!.remaining);
      }
      expect(admitted).toBe(10);
      expect(remaining.slice(0, 10)).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
      // Both read the same bucket: each sees the other's charges.
      expect(await old.peek(spec(key, algorithm))).toMatchObject({ remaining: 0 });
      expect(await now.peek(spec(key, algorithm))).toMatchObject({ remaining: 0 });
    },
  );

  it('keeps a request all-or-nothing across releases: a bucket one release exhausted refuses the other’s request whole', async () => {
    const { old, now } = await pair();
    const ip = keyOf(ruleKeyPrefix('ip-access'), 'ip', '198.51.100.9');
    const acct = keyOf(ruleKeyPrefix('uploading'), 'account', 'acct-9');
    for (let i = 0; i < 3; i++) expect((await old.consume([spec(acct, 'fixed-window', 3)])).allowed).toBe(true);
    const refused = await now.consume([spec(ip, 'fixed-window', 100), spec(acct, 'fixed-window', 3)]);
    expect(refused.allowed).toBe(false);
    // The ip bucket was not charged by the refused request, as the previous release reads it.
    expect(await old.peek(spec(ip, 'fixed-window', 100))).toMatchObject({ remaining: 100 });
  });

  it('counts apart, without errors, once the format is bumped: each release then misreads nothing of the other', async () => {
    const { old, now } = await pair(PREVIOUS_FORMAT + 1);
    const key = keyOf(ruleKeyPrefix('bumped'), 'ip', '192.0.2.44');
    for (let i = 0; i < 10; i++) expect((await old.consume([spec(key, 'fixed-window')])).allowed).toBe(true);
    expect((await old.consume([spec(key, 'fixed-window')])).allowed).toBe(false);
    // The bumped release keeps its buckets under another prefix: a full, fresh count.
    expect(formatPrefix(PREFIX, PREVIOUS_FORMAT + 1)).toBe(`${PREFIX}:f${PREVIOUS_FORMAT + 1}`);
    expect((await now.consume([spec(key, 'fixed-window')])).buckets[0]).toMatchObject({ remaining: 9 });
  });
});

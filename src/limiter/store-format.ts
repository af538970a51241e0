/**
 * @module The Redis store's format version, and the rule for two releases on one Redis (a rolling
 * upgrade). The format is the key layout (`<prefix>:<rule>:<tag>`, limiter/keys.ts), the bucket encoding
 * the Lua scripts read and write (redis/codec.ts, redis/lua/), and what the scripts do with it.
 *
 * Releases with the same format share their buckets: each loads its own scripts (EVALSHA by each text's
 * digest, so old and new scripts sit side by side in Redis's script cache) and each reads what the other
 * wrote, so a limit holds across the fleet throughout the rollout. A change to the format bumps
 * STORE_FORMAT, and from format 2 on it is part of every key (`<prefix>:f<N>:…`): the two releases then
 * count apart for the length of the rollout (a client may get a limit from each) instead of misreading
 * each other's buckets. test/ops/mixed-versions.test.ts runs the previous release's store code
 * (test/fixtures/previous-release, exported from git by scripts/export-previous-store.sh) beside this one's.
 */

/** Bump when a change makes this release's buckets unreadable, or wrongly readable, by the previous one's. */
export const STORE_FORMAT = 1;

/** The key prefix the Redis store is given for `store.prefix`: unchanged for format 1, so it reads what format-1 releases wrote. */
export function formatPrefix(prefix: string, format: number = STORE_FORMAT): string {
  return format === 1 ? prefix : `${prefix}:f${format}`;
}

/**
 * @module The default `store.maxKeys`: as many buckets as the memory this process may use holds, after
 * what the process needs without them, so that a flood of new clients meets a full table (429) before
 * the kernel's OOM killer (issue 37: a 256Mi pod with the old 1,000,000 would need ~480 MB).
 *
 * The memory the process may use, first found of: `RATEGATE_MEMORY_LIMIT` (bytes; the chart sets it
 * from the container's `resources.limits.memory`, and tests use it), the cgroup v2 limit
 * (`/sys/fs/cgroup/memory.max`), the cgroup v1 limit (`/sys/fs/cgroup/memory/memory.limit_in_bytes`),
 * else V8's heap limit (no container limit: the heap's ceiling is the nearest bound Node itself keeps).
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import v8 from 'node:v8';

/**
 * Bytes one bucket costs through the gateway, conservatively: RSS growth per bucket measured with the
 * Mastodon table, each client from its own IPv6 /64 (the dearest key kind: not packed, a string in a
 * Map), 291–400 B (bench/memory-gateway.ts; docs/stores.md), rounded up.
 */
export const BYTES_PER_BUCKET = 420;
/** What a gateway holds without buckets: RSS of a process started and warmed (116–133 MB measured), rounded up. */
export const BASELINE_BYTES = 144 * 2 ** 20;
/** The share of the memory limit the whole process may reach: the rest is headroom for bursts (bodies, connections). */
export const LIMIT_SHARE = 0.9;
/** Buckets held however small the limit: below this the table refuses new clients at once. */
export const MIN_KEYS = 1_000;

export type MemoryLimitSource = 'RATEGATE_MEMORY_LIMIT' | 'cgroup v2' | 'cgroup v1' | 'V8 heap limit';

export interface MemoryLimit {
  readonly bytes: number;
  readonly source: MemoryLimitSource;
}

/** The default bound: buckets that fit in `LIMIT_SHARE` of `limit` once `baseline` is taken, at `bytesPerBucket` each. */
export function maxKeysFor(limit: number, baseline: number, bytesPerBucket: number): number {
  const room = limit * LIMIT_SHARE - baseline;
  return Math.max(MIN_KEYS, Math.floor(room / bytesPerBucket));
}

/** A cgroup file's limit in bytes; undefined for none (`max`, v1's huge "unlimited", past the machine's memory) or no file. */
function cgroupLimit(path: string, read: (path: string) => string): number | undefined {
  let text: string;
  try {
    text = read(path).trim();
  } catch {
    return undefined;
  }
  const bytes = Number(text);
  return /^\d+$/.test(text) && bytes > 0 && bytes < os.totalmem() ? bytes : undefined;
}

/**
 * The memory this process may use. `env` and `read` are injected for tests; an unreadable or
 * malformed RATEGATE_MEMORY_LIMIT fails (an operator's typo must not pass as "no limit").
 */
export function memoryLimit(
  env: NodeJS.ProcessEnv = process.env,
  read = (path: string): string => readFileSync(path, 'utf8'),
): MemoryLimit {
  const given = env.RATEGATE_MEMORY_LIMIT;
  if (given !== undefined && given !== '') {
    if (!/^\d+$/.test(given) || Number(given) <= 0)
      throw new Error(`RATEGATE_MEMORY_LIMIT must be a number of bytes, not ${JSON.stringify(given)}`);
    return { bytes: Number(given), source: 'RATEGATE_MEMORY_LIMIT' };
  }
  const v2 = cgroupLimit('/sys/fs/cgroup/memory.max', read);
  if (v2 !== undefined) return { bytes: v2, source: 'cgroup v2' };
  const v1 = cgroupLimit('/sys/fs/cgroup/memory/memory.limit_in_bytes', read);
  if (v1 !== undefined) return { bytes: v1, source: 'cgroup v1' };
  return { bytes: v8.getHeapStatistics().heap_size_limit, source: 'V8 heap limit' };
}

/** The bound in force: `store.maxKeys` when given, else derived from the memory limit and the baseline (the larger of BASELINE_BYTES and this process's RSS now). */
export function effectiveMaxKeys(
  configured: number | undefined,
  limit: () => MemoryLimit = memoryLimit,
): { maxKeys: number; derived: MemoryLimit | null } {
  if (configured !== undefined) return { maxKeys: configured, derived: null };
  const l = limit();
  return {
    maxKeys: maxKeysFor(l.bytes, Math.max(BASELINE_BYTES, process.memoryUsage.rss()), BYTES_PER_BUCKET),
    derived: l,
  };
}

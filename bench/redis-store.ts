/**
 * @module Micro-benchmark of the Redis store: batching on vs off (see src/limiter/batcher.ts), single Redis
 * and cluster. (It first compared ioredis auto-pipelining on and off: no gain, about twice the p99,
 * so auto-pipelining is off for good.)
 *
 * Run: `npx tsx bench/redis-store.ts` (needs a redis-server binary, as the tests do). Each row fires
 * `N` consumes of a two-bucket request (one slot) with `C` in flight at a time, over distinct identities
 * so that nothing is rejected, and prints throughput, latency percentiles, script calls per consume and
 * the Redis CPU time spent in them (INFO commandstats).
 *
 * Measured on the development machine (2 vCPUs shared with other work, Node 20, Redis 7.0 on
 * loopback, N = 20 000), batching off | on:
 *
 *   target   in flight   consumes/s        p99 ms         scripts/consume   Redis µs/consume
 *   redis        1       17.0k | 17.6k    0.13 | 0.12     1.000 | 1.000     21.9 | 20.7
 *   redis       64       44.6k | 43.0k    3.9  | 3.3      1.000 | 0.016     19.4 | 13.6
 *   redis      256       36.0k | 60.4k   10.7  | 8.4      1.000 | 0.016     25.2 | 15.2
 *   cluster     64       40.8k | 32.5k    4.2  | 7.9      1.000 | 1.000     21.5 | 25.3
 *   cluster    256       33.7k | 20.8k   16.7  | 37.2     1.000 | 1.000     28.2 | 35.0
 *
 * After the bucket parameters were packed into one binary argument (redis-codec.ts writeBucketParams), one
 * Redis, batching on: 64 in flight 43.0k → 54.2k consumes/s, 256 in flight 60.4k → 92.3k, Redis CPU
 * 13.6 → 12.2 and 15.2 → 9.5 µs per consume; at 1 in flight 17.6k → 21.5k.
 *
 * On one Redis batching pays (fewer, larger script calls: less work on both sides); on a cluster the
 * distinct identities fall in distinct slots, nothing coalesces and the wait for the end of the turn
 * only costs, so RedisStore batches on a single Redis only.
 */
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { createRedisStore, type RedisStore } from '../src/limiter/redis/store.js';
import type { BucketSpec } from '../src/limiter/types.js';
import { startRedis, startRedisCluster } from '../test/support/redis.js';

const N = Number(process.env.BENCH_N ?? 20_000);
const CONCURRENCY = [1, 64, 256];

function request(i: number): BucketSpec[] {
  const tag = `{ip:10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}}`;
  return [
    {
      key: `ip-access:${tag}`,
      limit: 300,
      periodMs: 300_000,
      algorithm: 'fixed-window',
      cost: 1,
      shadow: false,
      onError: 'local',
    },
    {
      key: `sign-up:${tag}`,
      limit: 300,
      periodMs: 1_800_000,
      algorithm: 'token-bucket',
      cost: 1,
      shadow: false,
      onError: 'local',
    },
  ];
}

async function run(store: RedisStore, concurrency: number): Promise<{ perSec: number; p50: number; p99: number }> {
  const latencies = new Float64Array(N);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < N) {
      const i = next++;
      const t0 = performance.now();
      const out = await store.consume(request(i));
      latencies[i] = performance.now() - t0;
      if (!out.allowed) throw new Error('unexpected rejection');
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - t0) / 1000;
  latencies.sort();
  return { perSec: N / seconds, p50: latencies[Math.floor(N * 0.5)]!, p99: latencies[Math.floor(N * 0.99)]! };
}

/** Script calls and Redis CPU in them (µs, from INFO commandstats) so far, summed over `nodes`. */
async function scriptStats(nodes: readonly { url: string }[]): Promise<{ calls: number; usec: number }> {
  const out = { calls: 0, usec: 0 };
  for (const n of nodes) {
    const c = new Redis(n.url);
    const info = await c.info('commandstats');
    c.disconnect();
    for (const m of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+),usec=(\d+)/gm)) {
      out.calls += Number(m[1]);
      out.usec += Number(m[2]);
    }
  }
  return out;
}

async function main(): Promise<void> {
  const redis = await startRedis();
  const cluster = await startRedisCluster();
  const rows: string[][] = [
    ['target', 'in flight', 'batching', 'consumes/s', 'p50 ms', 'p99 ms', 'scripts/consume', 'Redis µs/consume'],
  ];
  try {
    for (const [name, url, nodes] of [
      ['redis', redis.url, [redis.node]],
      ['cluster', cluster.url, cluster.nodes],
    ] as const) {
      for (const concurrency of CONCURRENCY) {
        for (const batching of [false, true]) {
          const store = createRedisStore({
            url,
            prefix: `bench-${batching}-${concurrency}`,
            timeoutMs: 5_000,
            batching,
          });
          await store.ready();
          await run(store, concurrency); // warm-up: connections, script load, JIT
          const before = await scriptStats(nodes);
          const r = await run(store, concurrency);
          const after = await scriptStats(nodes);
          rows.push([
            name,
            String(concurrency),
            batching ? 'on' : 'off',
            r.perSec.toFixed(0),
            r.p50.toFixed(3),
            r.p99.toFixed(3),
            ((after.calls - before.calls) / N).toFixed(3),
            ((after.usec - before.usec) / N).toFixed(1),
          ]);
          await store.close();
        }
      }
    }
  } finally {
    await redis.stop();
    await cluster.stop();
  }
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  for (const r of rows) console.log(r.map((cell, c) => cell.padStart(widths[c]!)).join('  '));
}

await main();

/**
 * @module The gateway's CPU per decision in each layer of the Redis path, in one process, against the
 * memory store: what a consume of the forwarded scenario's three buckets costs the gateway process
 * (process.cpuUsage, user and kernel apart; redis-server's own CPU is not in it) with `C` consumes in
 * flight, as 32 keep-alive connections give.
 *
 *   npx tsx bench/redis-path-cost.ts [C=32] [N=40000]    (needs a redis-server binary, as the tests do)
 *   node --cpu-prof --cpu-prof-dir=DIR --import tsx bench/redis-path-cost.ts 8 10000 blocked
 *     then bench/profile-diff.ts on DIR (it writes DIR/load.json when --cpu-prof-dir is given)
 *
 * Layers, each measured alone (rounds interleaved, best of 3):
 *   memory          MemoryStore.consume (what memory mode calls);
 *   ioredis only    one EVALSHA per batch of C with the same argument shapes as the store's batch call,
 *                   through ioredis, a trivial script (the cost of ioredis + the socket, no Lua work);
 *   RedisStore      createRedisStore().consume (batching, packing, reply reading, ioredis, socket);
 *   + fault policy  createResilientStore around it;
 *   + blocked cache createBlockedCacheStore around that: what Redis mode calls.
 */
import { writeFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { createBlockedCacheStore } from '../src/limiter/blocked.js';
import { MemoryStore } from '../src/limiter/memory/store.js';
import { createRedisStore } from '../src/limiter/redis/store.js';
import { createResilientStore } from '../src/limiter/resilient.js';
import type { BucketSpec, Store } from '../src/limiter/types.js';
import { startRedis } from '../test/support/redis.js';

const C = Number(process.argv[2] ?? 32);
const N = Number(process.argv[3] ?? 40_000);
/** Only the layers whose name contains this (e.g. `blocked`, to profile Redis mode alone). */
const ONLY = process.argv[4];

/** The forwarded scenario's three buckets (account-access, ip-access, status-read), one client. */
function specsFor(i: number): BucketSpec[] {
  const ip = `{ip:40.0.${(i >> 8) & 255}.9}`;
  return [
    {
      key: `account-access:{acct:a:${i % 50}}`,
      limit: 1e9,
      periodMs: 300_000,
      algorithm: 'fixed-window',
      cost: 1,
      shadow: false,
      onError: 'local',
    },
    {
      key: `ip-access:${ip}`,
      limit: 1e9,
      periodMs: 300_000,
      algorithm: 'fixed-window',
      cost: 1,
      shadow: false,
      onError: 'local',
    },
    {
      key: `status-read:${ip}`,
      limit: 1e9,
      periodMs: 60_000,
      algorithm: 'sliding-window',
      cost: 1,
      shadow: false,
      onError: 'local',
    },
  ];
}

interface Cost {
  user: number;
  kernel: number;
  wallUs: number;
}

async function measure(consume: (specs: BucketSpec[]) => Promise<unknown>): Promise<Cost> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < N) await consume(specsFor(next++));
  };
  const t0 = process.cpuUsage();
  const w0 = performance.now();
  await Promise.all(Array.from({ length: C }, worker));
  const d = process.cpuUsage(t0);
  return { user: d.user / N, kernel: d.system / N, wallUs: ((performance.now() - w0) * 1000) / N };
}

/** ioredis alone: one EVALSHA per C consumes, arguments shaped like the store's batch call. */
function ioredisOnly(client: Redis, sha: string): (specs: BucketSpec[]) => Promise<unknown> {
  let pending: Array<() => void> = [];
  let scheduled = false;
  let batch: BucketSpec[][] = [];
  const flush = (): void => {
    scheduled = false;
    const waiting = pending;
    const specs = batch;
    pending = [];
    batch = [];
    const keys = specs.flat().map((s) => `rg:${s.key}`);
    const params = Buffer.alloc(40 * keys.length);
    void client.evalsha(sha, keys.length, ...keys, params, String(specs.length)).then(() => {
      for (const w of waiting) w();
    });
  };
  return (specs) =>
    new Promise<void>((resolve) => {
      pending.push(resolve);
      batch.push(specs);
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    });
}

async function main(): Promise<void> {
  const server = await startRedis();
  const client = new Redis(server.url);
  const sha = (await client.script('LOAD', 'local t = {} for i = 1, #KEYS * 3 do t[i] = 0 end return t')) as string;
  const memory = new MemoryStore({ sweepIntervalMs: 0 });
  const redis = createRedisStore({ url: server.url, prefix: 'cost', timeoutMs: 5_000 });
  await redis.ready();
  const resilient = createResilientStore(redis, { fallback: new MemoryStore({ sweepIntervalMs: 0 }) });
  const full = createBlockedCacheStore(resilient);
  const layers: Array<[string, (s: BucketSpec[]) => Promise<unknown>]> = [
    ['memory store', (s) => memory.consume(s)],
    ['ioredis only (trivial script)', ioredisOnly(client, sha)],
    ['RedisStore', (s) => redis.consume(s)],
    ['+ fault policy', (s) => resilient.consume(s)],
    ['+ blocked cache (Redis mode)', (s) => (full as Store).consume(s)],
  ];
  if (ONLY !== undefined) layers.splice(0, layers.length, ...layers.filter(([name]) => name.includes(ONLY)));
  const best = new Map<string, Cost>();
  for (const [, f] of layers) await measure(f); // warm-up: JIT, connections, scripts
  for (let round = 0; round < 3; round++) {
    for (const [name, f] of round % 2 === 0 ? layers : [...layers].reverse()) {
      const c = await measure(f);
      const b = best.get(name);
      if (!b || c.user + c.kernel < b.user + b.kernel) best.set(name, c);
    }
  }
  console.log(`gateway-process CPU per 3-bucket consume, ${C} in flight, ${N} consumes per run, best of 3 (µs):`);
  console.log(
    `${'layer'.padEnd(32)} ${'user'.padStart(6)} ${'kernel'.padStart(7)} ${'total'.padStart(7)} ${'wall/consume'.padStart(13)}`,
  );
  for (const [name] of layers) {
    const c = best.get(name)!;
    console.log(
      `${name.padEnd(32)} ${c.user.toFixed(1).padStart(6)} ${c.kernel.toFixed(1).padStart(7)} ${(c.user + c.kernel).toFixed(1).padStart(7)} ${c.wallUs.toFixed(1).padStart(13)}`,
    );
  }
  const profDir = process.execArgv.find((a) => a.startsWith('--cpu-prof-dir='))?.slice('--cpu-prof-dir='.length);
  if (profDir !== undefined)
    writeFileSync(`${profDir}/load.json`, `${JSON.stringify({ requests: 4 * N * layers.length })}\n`);
  await full.close();
  await memory.close();
  client.disconnect();
  await server.stop();
}

await main();

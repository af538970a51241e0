/**
 * @module Bytes per distinct client held by the memory store and what sits in front of it on the request
 * path (IP resolver cache, key building), heap and RSS, for N distinct IPv4 clients (default 150 000).
 *
 *   node --import tsx bench/memory-per-client.ts [N] [--blocked]      (or '{"clients":N}', from run.ts)
 *
 * Method, in one process with a fake clock:
 *   1. warm-up: N requests cycling over 20 000 clients, more than the IP resolver caches, so that the
 *      JIT, the young generation and the caches have grown to their working size under the same churn
 *      as in step 2; full GC; baseline;
 *   2. N distinct clients, one `GET /api/v1/statuses/1` each (the seed table's `ip-access` rule);
 *      full GC; the growth over the baseline divided by N is the cost of a distinct client;
 *   3. the clock moves past every window, the sweeper runs to the end; full GC: what is left is what
 *      expired clients still hold (should be ~0 per client).
 * "heap" is V8's heapUsed + external (typed-array backing stores live outside the V8 heap); "RSS" is the
 * whole process. `--blocked` puts the blocked-bucket cache in front, as the Redis store has it.
 * Prints one JSON line last (for bench/run.ts).
 */
import { readFileSync } from 'node:fs';
import v8 from 'node:v8';
import vm from 'node:vm';
import { parseConfig } from '../src/config/index.js';
import { createBlockedCacheStore } from '../src/limiter/blocked.js';
import { MemoryStore } from '../src/limiter/memory/store.js';
import type { Store } from '../src/limiter/types.js';
import { bucketsFor, buildRequestPolicy } from '../src/pipeline/policy.js';
import { knownClient } from '../src/pipeline/rule-inputs.js';

const json = process.argv[2]?.startsWith('{')
  ? (JSON.parse(process.argv[2]) as { clients?: number; blocked?: boolean })
  : {};
const N = json.clients ?? Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 150_000);
const BLOCKED = json.blocked === true || process.argv.includes('--blocked');
// A full GC on demand without asking for --expose-gc on the command line.
v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

let now = Date.UTC(2026, 10, 21, 19, 0, 0);
const snapshot = parseConfig(readFileSync('config/limits.yaml', 'utf8'), 'config/limits.yaml');
const policy = buildRequestPolicy(snapshot, async () => ({ kind: 'error' }));
const memory = new MemoryStore({ now: () => now, sweepIntervalMs: 0 });
const store: Store = BLOCKED ? createBlockedCacheStore(memory, { now: () => now }) : memory;
const rules = snapshot.matcher.match('GET', '/api/v1/statuses/1');

interface Sample {
  heap: number;
  rss: number;
}
function sample(): Sample {
  for (let i = 0; i < 3; i++) gc();
  const m = process.memoryUsage();
  return { heap: m.heapUsed + m.external, rss: m.rss };
}

async function requests(n: number, ipOf: (i: number) => string): Promise<void> {
  for (let i = 0; i < n; i++) {
    const client = policy.resolveIp(ipOf(i), undefined);
    const { specs } = bucketsFor(policy, rules, knownClient(client));
    await store.consume(specs);
  }
}

const distinct = (i: number): string => `${40 + (i >>> 16)}.${(i >>> 8) & 255}.${i & 255}.9`;
await requests(N, (i) => `198.18.${(i % 20_000) >> 8}.${(i % 20_000) & 255}`);
const base = sample();
const t0 = performance.now();
await requests(N, distinct);
const seconds = (performance.now() - t0) / 1000;
const full = sample();
const buckets = memory.size;
now += 31 * 60_000;
while (memory.size > 0) memory.sweepStep();
const swept = sample();

const per = (a: number, b: number): number => Math.round((a - b) / N);
const mb = (x: number): string => `${(x / 2 ** 20).toFixed(1)} MB`;
console.log(
  `${N.toLocaleString('en')} distinct clients${BLOCKED ? ' (blocked cache in front)' : ''}, ${buckets} buckets, ${(N / seconds).toFixed(0)} decisions/s`,
);
console.log(
  `  heap (used + external): ${mb(base.heap)} → ${mb(full.heap)} → after the windows + sweep ${mb(swept.heap)}`,
);
console.log(`  RSS:                    ${mb(base.rss)} → ${mb(full.rss)} → after the windows + sweep ${mb(swept.rss)}`);
console.log(
  `  per client: heap ${per(full.heap, base.heap)} B, RSS ${per(full.rss, base.rss)} B; left after expiry: heap ${per(swept.heap, base.heap)} B`,
);
console.log(
  JSON.stringify({
    clients: N,
    buckets,
    heapBytesPerClient: per(full.heap, base.heap),
    rssBytesPerClient: per(full.rss, base.rss),
    heapBytesPerClientAfterExpiry: per(swept.heap, base.heap),
  }),
);
await store.close();

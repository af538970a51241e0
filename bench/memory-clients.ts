/**
 * Memory for N distinct clients (default 1 000 000) through the real request-path pieces: the seed
 * table's matcher, the IP resolver, key building and the memory store. Prints RSS and heap before and
 * after, and after the windows expire and the sweeper runs.
 *
 *   npx tsx bench/memory-clients.ts [N]
 */
import { parseConfig } from '../src/config/index.js';
import { readFileSync } from 'node:fs';
import { MemoryStore } from '../src/limiter/memory/store.js';
import { bucketsFor, buildRequestPolicy } from '../src/pipeline/policy.js';
import { knownClient } from '../src/pipeline/rule-inputs.js';

const N = Number(process.argv[2] ?? 1_000_000);
let now = Date.UTC(2026, 10, 21, 19, 0, 0);
const snapshot = parseConfig(readFileSync('config/limits.yaml', 'utf8'), 'config/limits.yaml');
const policy = buildRequestPolicy(snapshot, async () => ({ kind: 'error' }));
const store = new MemoryStore({ now: () => now, sweepIntervalMs: 0 });

const mb = (n: number) => `${(n / 1024 / 1024).toFixed(0)} MB`;
function report(label: string): void {
  global.gc?.();
  const m = process.memoryUsage();
  console.log(
    `${label.padEnd(34)} rss ${mb(m.rss).padStart(7)}  heapUsed ${mb(m.heapUsed).padStart(7)}  buckets ${store.size}`,
  );
}

report('start');
const started = performance.now();
for (let i = 0; i < N; i++) {
  // Distinct IPv4 clients, one anonymous GET each (ip-access), and every tenth a sign-up too.
  const ip = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
  const client = policy.resolveIp(ip, undefined);
  const method = i % 10 === 0 ? 'POST' : 'GET';
  const path = i % 10 === 0 ? '/api/v1/accounts' : '/api/v1/statuses/1';
  const { specs } = bucketsFor(policy, snapshot.matcher.match(method, path), knownClient(client));
  store.consumeSync(specs);
}
const seconds = (performance.now() - started) / 1000;
report(`after ${N.toLocaleString('en')} clients`);
console.log(`  ${(N / seconds).toFixed(0)} decisions/s in one thread`);
now += 31 * 60_000;
while (store.size > 0) store.sweepStep();
report('after the windows passed + sweep');

/**
 * @module Where the Redis store's extra gateway CPU goes: two `.cpuprofile`s of the gateway under the same
 * forwarded load (memory store, Redis store), each sample charged to one category by its whole stack,
 * in µs per request (the request counts come from `load.json`, which the bench's profile scenario writes
 * next to each profile).
 *
 *   npx tsx bench/profile-diff.ts bench/.build/profiles/rategate-memory bench/.build/profiles/rategate-redis
 *
 * A sample is charged to the first category that matches its stack (leaf to root): GC; ioredis and its
 * parser (split by what they were doing); our Redis store module; the blocked cache and fault policy;
 * the memory store; the bare microtask queue (promise plumbing whose JS caller is gone); the rest
 * (HTTP in and out, undici, the gateway's own request path — common to both).
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

const CATEGORIES = [
  'GC',
  'ioredis: socket write (writeBuffer/writev under ioredis)',
  'ioredis: reply parsing (redis-parser)',
  'ioredis: reply conversion (convertBufferToString)',
  'ioredis: Command objects and argument encoding',
  'ioredis: other (stream data, promise wiring, events)',
  'our Redis store (batching, packing, reading replies)',
  'blocked cache + fault policy',
  'memory store',
  'microtask queue, no JS caller left (promise plumbing)',
  '(program): V8 and native, no JS frame',
  'the rest: HTTP in/out, undici, gateway request path',
] as const;
type Category = (typeof CATEGORIES)[number];

function classify(stack: Node[]): Category | null {
  const leaf = stack[0]!.callFrame.functionName;
  if (leaf === '(idle)') return null;
  if (leaf === '(garbage collector)') return 'GC';
  if (leaf === '(program)') return '(program): V8 and native, no JS frame';
  const has = (re: RegExp): boolean => stack.some((n) => re.test(n.callFrame.url));
  const hasFn = (re: RegExp, url?: RegExp): boolean =>
    stack.some((n) => re.test(n.callFrame.functionName) && (url === undefined || url.test(n.callFrame.url)));
  if (has(/node_modules\/(ioredis|redis-parser|standard-as-callback|denque|cluster-key-slot)\//)) {
    if (/^(writeBuffer|writev|writeUtf8String|writeLatin1String)$/.test(leaf))
      return 'ioredis: socket write (writeBuffer/writev under ioredis)';
    if (has(/node_modules\/redis-parser\//)) return 'ioredis: reply parsing (redis-parser)';
    if (hasFn(/^convertBufferToString$/)) return 'ioredis: reply conversion (convertBufferToString)';
    if (has(/ioredis\/built\/Command\.js/)) return 'ioredis: Command objects and argument encoding';
    return 'ioredis: other (stream data, promise wiring, events)';
  }
  if (has(/\/limiter\/redis[^/]*\.[jt]s$/)) return 'our Redis store (batching, packing, reading replies)';
  if (has(/\/limiter\/(blocked|resilient)\.[jt]s$/)) return 'blocked cache + fault policy';
  if (has(/\/limiter\/(memory|bucket-table)\.[jt]s$/)) return 'memory store';
  if (stack.every((n) => n.callFrame.url === '' || n.callFrame.url.startsWith('node:internal/process/task_queues'))) {
    if (/^(runMicrotasks|processTicksAndRejections|\(root\))$/.test(leaf) || stack.length <= 3)
      return 'microtask queue, no JS caller left (promise plumbing)';
  }
  return 'the rest: HTTP in/out, undici, gateway request path';
}

export function breakdown(dir: string): { requests: number; usPerRequest: Map<Category, number>; busyUs: number } {
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (file === undefined) throw new Error(`no .cpuprofile in ${dir}`);
  const prof = JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as Profile;
  const { requests } = JSON.parse(readFileSync(path.join(dir, 'load.json'), 'utf8')) as { requests: number };
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const cache = new Map<number, Category | null>();
  const us = new Map<Category, number>();
  let busy = 0;
  for (let i = 0; i < prof.samples.length; i++) {
    const id = prof.samples[i]!;
    let cat = cache.get(id);
    if (cat === undefined) {
      const stack: Node[] = [];
      for (let n: number | undefined = id; n !== undefined; n = parent.get(n)) stack.push(byId.get(n)!);
      cat = classify(stack);
      cache.set(id, cat);
    }
    if (cat === null) continue;
    const dt = Math.max(0, prof.timeDeltas[i + 1] ?? 0);
    busy += dt;
    us.set(cat, (us.get(cat) ?? 0) + dt);
  }
  const per = new Map<Category, number>();
  for (const c of CATEGORIES) per.set(c, (us.get(c) ?? 0) / requests);
  return { requests, usPerRequest: per, busyUs: busy / requests };
}

if (process.argv[1]?.endsWith('profile-diff.ts')) {
  const [memDir, redisDir] = process.argv.slice(2);
  if (!memDir || !redisDir) {
    console.error('usage: npx tsx bench/profile-diff.ts <memory profile dir> <redis profile dir>');
    process.exit(2);
  }
  const a = breakdown(memDir);
  const b = breakdown(redisDir);
  const f = (x: number): string => x.toFixed(1).padStart(7);
  console.log(
    `busy CPU per request in the profiles (µs): memory ${a.busyUs.toFixed(1)} (${a.requests} requests), Redis ${b.busyUs.toFixed(1)} (${b.requests} requests)\n`,
  );
  console.log(`| category | memory µs/req | Redis µs/req | Redis − memory |`);
  console.log(`|---|--:|--:|--:|`);
  for (const c of CATEGORIES) {
    const x = a.usPerRequest.get(c)!;
    const y = b.usPerRequest.get(c)!;
    console.log(`| ${c} | ${f(x)} | ${f(y)} | ${f(y - x)} |`);
  }
  console.log(`| **total busy** | ${f(a.busyUs)} | ${f(b.busyUs)} | ${f(b.busyUs - a.busyUs)} |`);
}

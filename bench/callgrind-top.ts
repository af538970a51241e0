/**
 * @module Reads one callgrind dump of the instructions scenario with JavaScript names: the functions with
 * the most instructions (self, or inclusive of what they call), per request, JIT code named through the
 * perf map the run kept (`perf.map` next to the dump, from node's `--perf-basic-prof`); and the calls
 * per request of chosen functions (promise and microtask builtins by default), which tell how many
 * promise hops a request takes without reading any code.
 *
 *   npx tsx bench/callgrind-top.ts bench/.build/callgrind/rategate-redis/run1 [--dump 2] [--requests 3000] [--top 40] [--inclusive] [--calls REGEX]
 *
 * `--dump 1` is the idle window (timers only: figures per second), `--dump 2` (default) the measured window
 * (figures per request); the main thread's file. The run's `run.json` gives the requests and seconds.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { jsName, readDump, readPerfMap, type CallgrindDump, type PerfMap } from './lib/callgrind.js';

/** Builtins a promise hop or an await goes through. */
const PROMISE_CALLS =
  '^Builtins_(PerformPromiseThen|PromiseResolve|ResolvePromise|PromiseConstructor|AsyncFunctionAwait\\w*|AsyncFunctionEnter|AsyncFunctionResolve|RunMicrotasks|EnqueueMicrotask|PromiseFulfillReactionJob|PromiseRejectReactionJob|PromiseResolveThenableJob|PromisePrototypeThen|NewPromiseCapability|FulfillPromise|PromiseCapabilityDefaultResolve|AsyncFunctionAwaitResolveClosure)$';

function mainThreadFile(dirOrFile: string, dump: number): string {
  if (statSync(dirOrFile).isFile()) return dirOrFile;
  const f = readdirSync(dirOrFile).find((x) => new RegExp(`^callgrind\\.out\\.\\d+\\.${dump}-01$`).test(x));
  if (f === undefined) throw new Error(`no main-thread file of dump ${dump} in ${dirOrFile}`);
  return path.join(dirOrFile, f);
}

/** Inclusive cost by function: its self cost plus what its calls cost (a recursive call counts again). */
function inclusive(d: CallgrindDump): Map<string, number> {
  const out = new Map(d.self);
  for (const e of d.edges) if (e.caller !== e.callee) out.set(e.caller, (out.get(e.caller) ?? 0) + e.cost);
  return out;
}

/** Costs by function name, JIT addresses resolved (several addresses of one function add up). */
function named(costs: ReadonlyMap<string, number>, map: PerfMap | null): Map<string, number> {
  const out = new Map<string, number>();
  for (const [fn, c] of costs) {
    const n = jsName(map, fn);
    out.set(n, (out.get(n) ?? 0) + c);
  }
  return out;
}

function main(): void {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      dump: { type: 'string', default: '2' },
      requests: { type: 'string' },
      top: { type: 'string', default: '40' },
      inclusive: { type: 'boolean', default: false },
      calls: { type: 'string', default: PROMISE_CALLS },
    },
  });
  const target = positionals[0];
  if (target === undefined) {
    console.error('usage: npx tsx bench/callgrind-top.ts DIR|FILE [--dump N] [--requests N] [--top N] [--inclusive] [--calls REGEX]');
    process.exit(2);
  }
  const file = mainThreadFile(target, Number(values.dump));
  const dir = statSync(target).isFile() ? path.dirname(target) : target;
  const map = readPerfMap(path.join(dir, 'perf.map'));
  const run = existsSync(path.join(dir, 'run.json'))
    ? (JSON.parse(readFileSync(path.join(dir, 'run.json'), 'utf8')) as { requests: number; idleSeconds: number })
    : null;
  const idle = values.dump === '1';
  const requests = Number(values.requests ?? (idle ? run?.idleSeconds : run?.requests) ?? 1);
  const per = idle && values.requests === undefined ? 'second' : 'request';
  const d = readDump(file);
  const costs = named(values.inclusive ? inclusive(d) : d.self, map);
  console.log(
    `${file}: ${(d.total / requests).toFixed(0)} instructions per ${per} over ${requests} (${map === null ? 'no perf map: JIT code unnamed' : 'JIT code named by perf.map'})`,
  );
  console.log(`\n| ${values.inclusive ? 'inclusive' : 'self'} per ${per} | share | function |\n|--:|--:|---|`);
  const rows = [...costs].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top));
  for (const [fn, c] of rows) console.log(`| ${(c / requests).toFixed(0)} | ${((c / d.total) * 100).toFixed(1)} % | ${fn.slice(0, 140)} |`);
  const wanted = new RegExp(values.calls);
  const calls = new Map<string, { calls: number; cost: number }>();
  for (const e of d.edges) {
    if (!wanted.test(e.callee)) continue;
    const c = calls.get(e.callee) ?? { calls: 0, cost: 0 };
    c.calls += e.calls;
    c.cost += e.cost;
    calls.set(e.callee, c);
  }
  console.log(`\n| calls per ${per} | inclusive instructions per ${per} | function |\n|--:|--:|---|`);
  for (const [fn, c] of [...calls].sort((a, b) => b[1].calls - a[1].calls))
    console.log(`| ${(c.calls / requests).toFixed(2)} | ${(c.cost / requests).toFixed(0)} | ${fn} |`);
}

main();

/**
 * @module Reads one callgrind dump of the instructions scenario with JavaScript names: the functions with
 * the most instructions (self, or inclusive of what they call), per request, JIT code named through the
 * perf map the run kept (`perf.map` next to the dump, from node's `--perf-basic-prof`); and the calls
 * per request of chosen functions (promise and microtask builtins by default), which tell how many
 * promise hops a request takes without reading any code.
 *
 *   npx tsx bench/callgrind-top.ts bench/.build/callgrind/rategate-redis/run1 [--dump 2] [--requests 3000] [--top 40] [--inclusive] [--calls REGEX]
 *   npx tsx bench/callgrind-top.ts DIR --vs OTHER_DIR     (what differs per request, largest first: a regression's functions)
 *   npx tsx bench/callgrind-top.ts --figures RUN_DIR…     (each run's figures worked out again from its kept dumps)
 *   npx tsx bench/callgrind-top.ts DIR --callers REGEX    (who calls the functions REGEX names, and what those calls cost: which code pays for a megamorphic load)
 *
 * `--dump 1` is the idle window (timers only: figures per second), `--dump 2` (default) the measured window
 * (figures per request); the main thread's file. The run's `run.json` gives the requests and seconds.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { jsName, readDump, readPerfMap, runFigures, type CallgrindDump, type PerfMap } from './lib/callgrind.js';

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

interface Loaded {
  readonly file: string;
  readonly per: 'request' | 'second';
  readonly total: number;
  /** Cost per request (or second) by function name. */
  readonly costs: Map<string, number>;
  /** Calls and inclusive cost per request (or second) of the functions `wanted` names. */
  readonly calls: Map<string, { calls: number; cost: number }>;
}

/** The same function in two builds or tiers: no checkout path, no tier mark (`*` optimized, `^` baseline, `~` interpreted). */
const comparable = (name: string): string =>
  name
    .replace(/^JS:[*^~]/, 'JS:')
    .replace(/file:\/\/\/\S*?\/dist\//, 'dist/')
    .replace(/\/\S*\/node_modules\//, 'node_modules/');

/** A run's main-thread file of dump `dump`, its perf map (JIT names) and its run.json (requests, idle seconds). */
function openRun(
  target: string,
  dump: string,
): { file: string; map: PerfMap | null; run: { requests: number; idleSeconds: number } | null } {
  const file = mainThreadFile(target, Number(dump));
  const dir = statSync(target).isFile() ? path.dirname(target) : target;
  const run = existsSync(path.join(dir, 'run.json'))
    ? (JSON.parse(readFileSync(path.join(dir, 'run.json'), 'utf8')) as { requests: number; idleSeconds: number })
    : null;
  return { file, map: readPerfMap(path.join(dir, 'perf.map')), run };
}

function load(
  target: string,
  dump: string,
  inclusiveCosts: boolean,
  requestsGiven: string | undefined,
  wanted: RegExp,
  strip: boolean,
): Loaded {
  const { file, map, run } = openRun(target, dump);
  const idle = dump === '1';
  const n = Number(requestsGiven ?? (idle ? run?.idleSeconds : run?.requests) ?? 1);
  const d = readDump(file);
  const costs = new Map<string, number>();
  for (const [fn, c] of named(inclusiveCosts ? inclusive(d) : d.self, map)) {
    const k = strip ? comparable(fn) : fn;
    costs.set(k, (costs.get(k) ?? 0) + c / n);
  }
  const calls = new Map<string, { calls: number; cost: number }>();
  for (const e of d.edges) {
    if (!wanted.test(e.callee)) continue;
    const c = calls.get(e.callee) ?? { calls: 0, cost: 0 };
    c.calls += e.calls / n;
    c.cost += e.cost / n;
    calls.set(e.callee, c);
  }
  if (map === null) console.log(`${file}: no perf map, JIT code unnamed`);
  return { file, per: idle && requestsGiven === undefined ? 'second' : 'request', total: d.total / n, costs, calls };
}

/** The callers of the functions `pattern` names, by the inclusive cost of their calls per request. */
function printCallers(
  target: string,
  dump: string,
  requestsGiven: string | undefined,
  pattern: string,
  top: number,
): void {
  const { file, map, run } = openRun(target, dump);
  const n = Number(requestsGiven ?? run?.requests ?? 1);
  const wanted = new RegExp(pattern);
  const by = new Map<string, { calls: number; cost: number }>();
  for (const e of readDump(file).edges) {
    const callee = jsName(map, e.callee);
    if (!wanted.test(callee)) continue;
    const k = `${comparable(jsName(map, e.caller)).slice(0, 110)} → ${callee.slice(0, 40)}`;
    const c = by.get(k) ?? { calls: 0, cost: 0 };
    c.calls += e.calls / n;
    c.cost += e.cost / n;
    by.set(k, c);
  }
  console.log(
    `${file}: callers of /${pattern}/, per request\n\n| calls | inclusive cost | caller → callee |\n|--:|--:|---|`,
  );
  for (const [k, c] of [...by].sort((x, y) => y[1].cost - x[1].cost).slice(0, top))
    console.log(`| ${c.calls.toFixed(2)} | ${c.cost.toFixed(0)} | ${k} |`);
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
      vs: { type: 'string' },
      figures: { type: 'boolean', default: false },
      callers: { type: 'string' },
    },
  });
  if (values.callers !== undefined)
    return printCallers(positionals[0]!, values.dump, values.requests, values.callers, Number(values.top));
  if (values.figures) {
    const k = (x: number): string => `${(x / 1000).toFixed(1)}k`;
    console.log(
      '| run | main thread | without GC, compile | GC | compile | timers subtracted | idle /s | all threads |\n|---|--:|--:|--:|--:|--:|--:|--:|',
    );
    for (const dir of positionals) {
      const r = runFigures(dir);
      console.log(
        `| ${dir} | ${k(r.main)} | ${k(r.main - r.gc - r.compile)} | ${k(r.gc)} | ${k(r.compile)} | ${k(r.timers)} | ${k(r.idlePerSecond)} | ${k(r.allThreads)} |`,
      );
    }
    return;
  }
  const target = positionals[0];
  if (target === undefined) {
    console.error(
      'usage: npx tsx bench/callgrind-top.ts DIR|FILE [--vs DIR|FILE] [--dump N] [--requests N] [--top N] [--inclusive] [--calls REGEX]',
    );
    process.exit(2);
  }
  const wanted = new RegExp(values.calls);
  const top = Number(values.top);
  const kind = values.inclusive ? 'inclusive' : 'self';
  const a = load(target, values.dump, values.inclusive, values.requests, wanted, values.vs !== undefined);
  if (values.vs === undefined) {
    console.log(`${a.file}: ${a.total.toFixed(0)} instructions per ${a.per}`);
    console.log(`\n| ${kind} per ${a.per} | share | function |\n|--:|--:|---|`);
    for (const [fn, c] of [...a.costs].sort((x, y) => y[1] - x[1]).slice(0, top))
      console.log(`| ${c.toFixed(0)} | ${((c / a.total) * 100).toFixed(1)} % | ${fn.slice(0, 140)} |`);
    console.log(`\n| calls per ${a.per} | inclusive instructions per ${a.per} | function |\n|--:|--:|---|`);
    for (const [fn, c] of [...a.calls].sort((x, y) => y[1].calls - x[1].calls))
      console.log(`| ${c.calls.toFixed(2)} | ${c.cost.toFixed(0)} | ${fn} |`);
    return;
  }
  const b = load(values.vs, values.dump, values.inclusive, values.requests, wanted, true);
  console.log(
    `${a.file}: ${a.total.toFixed(0)} per ${a.per}\n  vs ${b.file}: ${b.total.toFixed(0)} (difference ${(a.total - b.total).toFixed(0)})`,
  );
  const diff = new Map<string, [number, number]>();
  for (const [fn, c] of a.costs) diff.set(fn, [c, b.costs.get(fn) ?? 0]);
  for (const [fn, c] of b.costs) if (!diff.has(fn)) diff.set(fn, [0, c]);
  console.log(`\n| ${kind}, first | second | first − second | function |\n|--:|--:|--:|---|`);
  const rows = [...diff].sort((x, y) => Math.abs(y[1][0] - y[1][1]) - Math.abs(x[1][0] - x[1][1])).slice(0, top);
  for (const [fn, [x, y]] of rows)
    console.log(`| ${x.toFixed(0)} | ${y.toFixed(0)} | ${(x - y).toFixed(0)} | ${fn.slice(0, 140)} |`);
  console.log(`\n| calls, first | second | function |\n|--:|--:|---|`);
  const names = new Set([...a.calls.keys(), ...b.calls.keys()]);
  for (const fn of [...names].sort((x, y) => (a.calls.get(y)?.calls ?? 0) - (a.calls.get(x)?.calls ?? 0)))
    console.log(
      `| ${(a.calls.get(fn)?.calls ?? 0).toFixed(2)} | ${(b.calls.get(fn)?.calls ?? 0).toFixed(2)} | ${fn} |`,
    );
}

main();

/**
 * @module Reads a callgrind dump (one thread's file of `--separate-threads=yes`): each function's self
 * cost, the calls between functions with their inclusive cost, and the instructions spent under a set of
 * entry points (V8's garbage collector, its compilers), so that a window's count can show them apart.
 * JIT-compiled JavaScript has no symbol: `jsNames` maps its addresses to names through the perf map
 * V8 writes with `--perf-basic-prof` (`/tmp/perf-PID.map`). `runFigures` turns one run's two dumps (idle,
 * measured window) into its figures per request, so that they can be worked out again from kept dumps.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { InstructionsRun } from './types.js';

export interface CallEdge {
  readonly caller: string;
  readonly callee: string;
  readonly calls: number;
  /** Instructions spent in the callee (inclusive) for these calls. */
  readonly cost: number;
}

export interface CallgrindDump {
  /** The `totals:` line: every instruction of this thread in the dump. */
  readonly total: number;
  /** Self cost by function name (recursion suffixes `'2` folded in). */
  readonly self: ReadonlyMap<string, number>;
  readonly edges: readonly CallEdge[];
}

/** `fn=(12) name` defines id 12; a later `fn=(12)` refers to it (callgrind's name compression). */
function nameOf(table: Map<string, string>, spec: string): string {
  const m = /^\((\d+)\)(?: (.*))?$/.exec(spec);
  if (m === null) return spec;
  if (m[2] !== undefined) table.set(m[1]!, m[2]);
  return table.get(m[1]!) ?? spec;
}

const fold = (name: string): string => name.replace(/'\d+$/, '');

export function readDump(file: string): CallgrindDump {
  const names = new Map<string, string>();
  const self = new Map<string, number>();
  const edges = new Map<string, { caller: string; callee: string; calls: number; cost: number }>();
  let total = 0;
  let fn = '';
  let callee = '';
  let calls = -1;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (line === '') continue;
    const c = line.charCodeAt(0);
    // Cost lines start with a position: a digit, +, - or *.
    if ((c >= 48 && c <= 57) || c === 43 || c === 45 || c === 42) {
      const cost = Number(line.split(' ')[1] ?? 0);
      if (calls >= 0) {
        const key = `${fn}\u0000${callee}`;
        const e = edges.get(key) ?? { caller: fn, callee, calls: 0, cost: 0 };
        e.calls += calls;
        e.cost += cost;
        edges.set(key, e);
        calls = -1;
      } else self.set(fn, (self.get(fn) ?? 0) + cost);
      continue;
    }
    const eq = line.indexOf('=');
    const key = eq > 0 ? line.slice(0, eq) : '';
    const value = line.slice(eq + 1);
    if (key === 'fn') fn = fold(nameOf(names, value));
    else if (key === 'cfn') callee = fold(nameOf(names, value));
    else if (key === 'calls') calls = Number(value.split(' ')[0]);
    else if (line.startsWith('totals:')) total = Number(line.slice(7).trim());
  }
  return { total, self, edges: [...edges.values()] };
}

/**
 * Instructions spent under any entry point `isRoot` names, entered from code outside `isInside` (so a
 * root called from within another is not counted twice), and how many times they were entered.
 */
export function spentUnder(
  dump: CallgrindDump,
  isRoot: (fn: string) => boolean,
  isInside: (fn: string) => boolean,
): { cost: number; entries: number } {
  let cost = 0;
  let entries = 0;
  for (const e of dump.edges) {
    if (!isRoot(e.callee) || isRoot(e.caller) || isInside(e.caller)) continue;
    cost += e.cost;
    entries += e.calls;
  }
  return { cost, entries };
}

/** V8's garbage collector on this thread: collections, incremental marking steps, GC tasks. */
const GC_ROOT =
  /^v8::internal::(Heap::(CollectGarbage|CollectAllGarbage|CollectAllAvailableGarbage|StartIncrementalMarking|FinalizeIncrementalMarkingAtomically|HandleGCRequest)|IncrementalMarking::(Step|AdvanceOnAllocation|AdvanceAndFinalizeIfComplete|Start|AdvanceFromTask)|ScavengeJob::|MinorGCJob::|IncrementalMarkingJob::|MemoryReducer::)/;
const GC_INSIDE =
  /^v8::internal::(Heap::|IncrementalMarking|MarkCompact|MinorMarkCompact|Scavenge|MemoryReducer|GCTracer|IncrementalMarkingJob|ScavengeJob|MinorGCJob)/;
/** V8's compilers on this thread: lazy and baseline compiles, installing TurboFan's jobs, tiering, deopts. */
const COMPILE_ROOT =
  /^v8::internal::(Compiler::|OptimizingCompileDispatcher::InstallOptimizedFunctions|baseline::|TieringManager::|Deoptimizer::|Runtime_(CompileLazy|CompileOptimized|CompileTurbofan|CompileMaglev|CompileBaseline|InstallBaselineCode|HealOptimizedCodeSlot|NotifyDeoptimized|BytecodeBudgetInterrupt|FunctionFirstExecution))/;
const COMPILE_INSIDE =
  /^v8::internal::(Compiler|compiler::|baseline::|OptimizingCompileDispatcher|Deoptimizer|Parser|TieringManager|interpreter::|Runtime_Compile)/;

export function gcCost(dump: CallgrindDump): { cost: number; entries: number } {
  return spentUnder(
    dump,
    (f) => GC_ROOT.test(f),
    (f) => GC_INSIDE.test(f),
  );
}

export function compileCost(dump: CallgrindDump): { cost: number; entries: number } {
  return spentUnder(
    dump,
    (f) => COMPILE_ROOT.test(f),
    (f) => COMPILE_INSIDE.test(f) || GC_INSIDE.test(f),
  );
}

/** TurboFan's background jobs on a worker thread: what is still being optimized in the window. */
const OPTIMIZING = /^v8::internal::OptimizingCompileDispatcher::CompileTask::RunInternal/;
function optimizingCost(dump: CallgrindDump): number {
  return spentUnder(
    dump,
    (f) => OPTIMIZING.test(f),
    () => false,
  ).cost;
}

/** A perf map (`start size name` per line, hex) as sorted arrays, for address look-ups. */
export interface PerfMap {
  readonly starts: Float64Array;
  readonly ends: Float64Array;
  readonly names: readonly string[];
}

export function readPerfMap(file: string): PerfMap | null {
  if (!existsSync(file)) return null;
  const rows: Array<[number, number, string]> = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/i.exec(line);
    if (m) rows.push([parseInt(m[1]!, 16), parseInt(m[2]!, 16), m[3]!]);
  }
  rows.sort((a, b) => a[0] - b[0]);
  return {
    starts: Float64Array.from(rows, (r) => r[0]),
    ends: Float64Array.from(rows, (r) => r[0] + r[1]),
    names: rows.map((r) => r[2]),
  };
}

/** The JavaScript function at a callgrind name like `0x00001053cea83040`, or the name itself. */
export function jsName(map: PerfMap | null, fn: string): string {
  if (map === null || !fn.startsWith('0x')) return fn;
  const at = parseInt(fn, 16);
  let lo = 0;
  let hi = map.starts.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (map.starts[mid]! <= at) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  // Code can be recompiled at an address an older entry covered: the latest entry starting at or before it wins.
  return found >= 0 && at < map.ends[found]! ? map.names[found]! : fn;
}

/** JS timers: every callback of node's timer list runs inside this (libuv's timer callback). */
const TIMERS = /^node::Environment::RunTimers/;

/** What a run of the instructions scenario wrote beside its dumps. */
export interface RunInfo {
  readonly pid: number;
  readonly idleSeconds: number;
  readonly requests: number;
  readonly seconds: number;
}

/**
 * One run's figures per request from its dumps (1: idle window, 2: measured window). Timer work, which
 * grows per request with valgrind's slowdown, is taken out: the window's own JS timers as the call
 * graph counts them (calls into RunTimers), plus the idle window's other work per second (the I/O
 * the timers cause: a poll's reply, a file read; the loop's wake-ups) × the window's seconds.
 */
export function runFigures(dir: string): Omit<InstructionsRun, 'non200' | 'redisScriptCalls'> {
  const run = JSON.parse(readFileSync(path.join(dir, 'run.json'), 'utf8')) as RunInfo;
  const file = (dump: number, thread: string): string => path.join(dir, `callgrind.out.${run.pid}.${dump}-${thread}`);
  const idle = readDump(file(1, '01'));
  const window = readDump(file(2, '01'));
  const timersOf = (d: CallgrindDump): number =>
    spentUnder(
      d,
      (f) => TIMERS.test(f),
      () => false,
    ).cost;
  const idleRest = (idle.total - timersOf(idle)) / run.idleSeconds;
  const timers = (timersOf(window) + idleRest * run.seconds) / run.requests;
  let allThreads = 0;
  let optimizing = 0;
  for (const f of readdirSync(dir).filter((x) => x.startsWith(`callgrind.out.${run.pid}.2-`))) {
    const d = f.endsWith('-01') ? window : readDump(path.join(dir, f));
    allThreads += d.total;
    if (!f.endsWith('-01')) optimizing += optimizingCost(d);
  }
  const gc = gcCost(window);
  return {
    requests: run.requests,
    seconds: run.seconds,
    main: window.total / run.requests - timers,
    gc: gc.cost / run.requests,
    gcEntries: gc.entries,
    compile: compileCost(window).cost / run.requests,
    timers,
    idlePerSecond: idle.total / run.idleSeconds,
    allThreads: allThreads / run.requests,
    optimizing: optimizing / run.requests,
  };
}

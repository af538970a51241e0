/**
 * @module The bench's report: the issue goals (ratios), the throughput and CPU tables, the chart.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { renderChart, type Panel } from './chart.js';
import { fmtInt, fmtMs, fmtUs, statusSummary } from './format.js';
import { CONNECTIONS, LABELS, MANY_CLIENTS, ORDER, RATE, results, type SystemKey } from './settings.js';
import type { InstructionsResult, InstructionsRun, MemoryResult, PerClientResult, SystemResult } from './types.js';
import { INSTR_LABELS, INSTR_ORDER, instrSystem, refusedRow, type InstrKey } from '../scenarios/instructions.js';
import { BYTES_PER_BUCKET } from '../../src/limiter/memory/key-bound.js';

export interface Ratio {
  name: string;
  value: number | null;
  /**
   * The same throughput ratio estimated from CPU time: with every core busy, req/s ≈ cores / total CPU
   * per request, so a/b ≈ total(b) / total(a). Steadier than req/s on a shared machine.
   */
  byCpu?: number | null;
  target: string;
  pass: boolean | null;
  detail: string;
}

/** redis-server CPU µs per forwarded request before leases (quick run on this machine, 2026-11-24): issue 24's ÷ 5 is from it. */
export const REDIS_US_BEFORE_LEASES = 14.1;

/** The goals of issue 14 (ratios against the bare Node forwarder, the Node ceiling), measured in this run. */
export function ratios(perClient: PerClientResult | null): Ratio[] {
  const rps = (k: SystemKey, s: 'forwarded' | 'rejected'): number | null => results[k]?.[s]?.rps ?? null;
  const div = (a: number | null, b: number | null): number | null => (a !== null && b !== null && b > 0 ? a / b : null);
  const out: Ratio[] = [];
  const total = (k: SystemKey, s: 'forwarded' | 'rejected' = 'forwarded'): number | null =>
    results[k]?.[s]?.cpuUsPerRequest?.total ?? null;
  const ratio = (
    name: string,
    value: number | null,
    min: number,
    missing: string,
    byCpu: number | null = null,
  ): void => {
    out.push({
      name,
      value,
      byCpu,
      target: `≥ ${min}`,
      pass: value === null ? null : value >= min,
      detail: value === null ? missing : '',
    });
  };
  const why = (...keys: SystemKey[]): string =>
    keys
      .map((k) => results[k]?.skipped)
      .filter(Boolean)
      .join('; ') || 'not measured';
  ratio(
    'rategate memory / bare forwarder (forwarded req/s)',
    div(rps('rategate-memory', 'forwarded'), rps('thin', 'forwarded')),
    0.9,
    why('rategate-memory', 'thin'),
    div(total('thin'), total('rategate-memory')),
  );
  ratio(
    'rategate Redis / bare forwarder (forwarded req/s)',
    div(rps('rategate-redis', 'forwarded'), rps('thin', 'forwarded')),
    0.8,
    why('rategate-redis', 'thin'),
    div(total('thin'), total('rategate-redis')),
  );
  ratio(
    'rategate Redis / fastify peer (forwarded req/s)',
    div(rps('rategate-redis', 'forwarded'), rps('fastify', 'forwarded')),
    1.6,
    why('rategate-redis', 'fastify'),
    div(total('fastify'), total('rategate-redis')),
  );
  ratio(
    'rejected / forwarded req/s (rategate Redis)',
    div(rps('rategate-redis', 'rejected'), rps('rategate-redis', 'forwarded')),
    2,
    why('rategate-redis'),
  );
  ratio(
    'rejected / forwarded req/s (rategate memory)',
    div(rps('rategate-memory', 'rejected'), rps('rategate-memory', 'forwarded')),
    2,
    why('rategate-memory'),
  );
  ratio(
    'access log on / off, memory (forwarded req/s)',
    div(rps('rategate-memory-log', 'forwarded'), rps('rategate-memory', 'forwarded')),
    0.9,
    why('rategate-memory-log', 'rategate-memory'),
    div(total('rategate-memory'), total('rategate-memory-log')),
  );
  const bpc = perClient?.rssBytesPerClient ?? null;
  out.push({
    name: 'memory store per distinct client, bytes of RSS',
    value: bpc,
    target: '≤ 250',
    pass: bpc === null ? null : bpc <= 250 && (perClient!.heapBytesPerClientAfterExpiry ?? Infinity) <= 25,
    detail: bpc === null ? 'not measured (--skip memory)' : '',
  });
  const gw = perClient?.gateway;
  out.push({
    name: 'gateway per bucket, bytes of RSS (Mastodon table, IPv6 /64 clients)',
    value: gw?.rssBytesPerBucket ?? null,
    target: `≤ ${BYTES_PER_BUCKET} (store.maxKeys's default assumes it)`,
    pass:
      gw === undefined ? null : gw.rssBytesPerBucket <= BYTES_PER_BUCKET && gw.heapBytesPerBucket <= BYTES_PER_BUCKET,
    detail:
      gw === undefined
        ? 'not measured (--skip memory)'
        : `${gw.rssBytesPerClient} B RSS a client, ${gw.bucketsPerClient} buckets each`,
  });
  const calls = results['rategate-redis']?.rejected?.redisCallsPerRequest;
  out.push({
    name: 'Redis commands per rejection (rategate-redis)',
    value: calls ?? null,
    target: '≈ 0 (< 0.01)',
    pass: calls === undefined ? null : calls < 0.01,
    detail: calls === undefined ? why('rategate-redis') : '',
  });
  // Issue 24 (leases): the Redis path near the memory path, and the store's work per request cut.
  const many = (k: SystemKey): number | null => results[k]?.manyClients?.rps ?? null;
  ratio(
    'issue 24: rategate Redis / bare forwarder, hot key (forwarded req/s)',
    div(rps('rategate-redis', 'forwarded'), rps('thin', 'forwarded')),
    0.85,
    why('rategate-redis', 'thin'),
    div(total('thin'), total('rategate-redis')),
  );
  ratio(
    `issue 24: rategate Redis / bare forwarder, ${MANY_CLIENTS.toLocaleString('en')} clients (req/s)`,
    div(many('rategate-redis'), many('thin')),
    0.7,
    'not measured (--skip clients)',
  );
  const redisUs = results['rategate-redis']?.forwarded?.cpuUsPerRequest?.redis ?? null;
  out.push({
    name: 'issue 24: redis-server CPU per forwarded request, hot key, µs',
    value: redisUs,
    target: `≤ ${(REDIS_US_BEFORE_LEASES / 5).toFixed(1)} (÷ 5 of ${REDIS_US_BEFORE_LEASES})`,
    pass: redisUs === null ? null : redisUs <= REDIS_US_BEFORE_LEASES / 5,
    detail: redisUs === null ? why('rategate-redis') : '',
  });
  const direct = results.direct?.fixedRate?.p99;
  for (const k of ['rategate-redis', 'rategate-memory'] as const) {
    const p = results[k]?.fixedRate?.p99;
    const added = p !== undefined && direct !== undefined ? p - direct : null;
    out.push({
      name: `p99 added over direct upstream at ${RATE} req/s (${LABELS[k]}), ms`,
      value: added,
      target: '≤ 2',
      pass: added === null ? null : added <= 2,
      detail: added === null ? why(k, 'direct') : '',
    });
  }
  return out;
}

export function table(): string {
  const lines: string[] = [];
  const head1 = `${''.padEnd(28)} ${'forwarded, 32 conn'.padEnd(32)} ${`fixed ${RATE}/s`.padEnd(15)} ${'rejected, 32 conn'.padEnd(24)} ${'mixed seed, 32 conn'.padEnd(22)}`;
  const head2 = `${'system'.padEnd(28)} ${'req/s'.padStart(8)} ${'µs CPU'.padStart(7)} ${'p50'.padStart(7)} ${'p99'.padStart(7)}  ${'p50'.padStart(6)} ${'p99'.padStart(6)}   ${'req/s'.padStart(8)} ${'p50'.padStart(7)} ${'p99'.padStart(7)}  ${'req/s'.padStart(8)} ${'p99'.padStart(7)} ${'429'.padStart(5)}`;
  lines.push(head1, head2, '-'.repeat(head2.length));
  for (const k of ORDER) {
    const r = results[k];
    if (!r) continue;
    if (r.skipped !== undefined) {
      lines.push(`${r.label.padEnd(28)} skipped: ${r.skipped.slice(0, 100)}`);
      continue;
    }
    const f = r.forwarded;
    const fr = r.fixedRate;
    const rj = r.rejected;
    const mx = r.mixed;
    const mxTotal = mx ? Object.values(mx.statuses).reduce((a, b) => a + b, 0) : 0;
    const mx429 = mx ? `${(((mx.statuses['429'] ?? 0) * 100) / (mxTotal || 1)).toFixed(0)}%` : '—';
    lines.push(
      `${r.label.padEnd(28)} ${fmtInt(f?.rps).padStart(8)} ${fmtUs(f?.cpuUsPerRequest?.system).padStart(7)} ${fmtMs(f?.p50).padStart(7)} ${fmtMs(f?.p99).padStart(7)}  ${fmtMs(fr?.p50).padStart(6)} ${fmtMs(fr?.p99).padStart(6)}   ${(rj ? fmtInt(rj.rps) : '—').padStart(8)} ${fmtMs(rj?.p50).padStart(7)} ${fmtMs(rj?.p99).padStart(7)}  ${fmtInt(mx?.rps).padStart(8)} ${fmtMs(mx?.p99).padStart(7)} ${mx429.padStart(5)}`,
    );
  }
  lines.push(
    "(µs CPU: the system's own CPU time per forwarded request, /proc, the most stable figure on a shared machine; latencies in ms; p50/p99 at fixed rate from an open-loop paced client, the others from autocannon)",
  );
  return lines.join('\n');
}

/**
 * Where the CPU goes: µs of CPU time per forwarded request in each process, in the best round. On a
 * machine whose cores are all busy (gateway, upstream, Redis and load generator share them),
 * throughput is about cores / total, so a ratio between two systems is about the inverse ratio of
 * their totals, whatever part of it the gateway is.
 */
export function cpuTable(): string {
  const cores = os.cpus().length;
  const us = (x: number | null | undefined): string =>
    x === null || x === undefined || Number.isNaN(x) ? '—' : x.toFixed(1);
  const lines = [
    `CPU time per forwarded request, µs (measured phase, ${CONNECTIONS} connections; ${cores} cores ⇒ at most ${cores} × 10⁶ / total req/s with every core busy)`,
    `${'system'.padEnd(28)} ${'itself'.padStart(7)} ${'(user'.padStart(6)} ${'+ kernel)'.padStart(9)} ${'upstream'.padStart(9)} ${'redis'.padStart(7)} ${'load gen'.padStart(9)} ${'total'.padStart(7)} ${'cores busy'.padStart(11)}`,
  ];
  for (const k of ORDER) {
    const f = results[k]?.forwarded;
    const c = f?.cpuUsPerRequest;
    if (!f || !c) continue;
    lines.push(
      `${LABELS[k].padEnd(28)} ${us(c.system).padStart(7)} ${us(c.systemUser).padStart(6)} ${us(c.systemKernel).padStart(9)} ${us(c.upstream).padStart(9)} ${us(c.redis).padStart(7)} ${us(c.loadGenerator).padStart(9)} ${us(c.total).padStart(7)} ${((c.total * f.rps) / 1e6).toFixed(2).padStart(11)}`,
    );
  }
  return lines.join('\n');
}

export interface ChartInput {
  systems: Partial<Record<SystemKey, SystemResult>>;
  connections: number;
  rate: number;
  machine: Record<string, unknown>;
  memory: MemoryResult | null;
  date: string;
}

export function chart(c: ChartInput): string {
  const keys = ORDER.filter((k) => c.systems[k] && c.systems[k]!.skipped === undefined);
  const sys = (k: SystemKey): SystemResult => c.systems[k]!;
  const panels: Panel[] = [
    {
      title: `Throughput at ${c.connections} connections, requests forwarded to the upstream (higher is better)`,
      unit: 'req/s',
      series: ['forwarded (3 rules matched)', 'mixed seed traffic'],
      colors: ['#2563eb', '#16a34a'],
      groups: keys.map((k) => ({
        label: LABELS[k],
        values: [sys(k).forwarded?.rps ?? null, sys(k).mixed?.rps ?? null],
      })),
    },
    {
      title: `Throughput at ${c.connections} connections, requests rejected by an exhausted bucket (higher is better)`,
      unit: 'req/s',
      series: ['rejected (429)'],
      colors: ['#dc2626'],
      groups: keys
        .filter((k) => sys(k).rejected !== undefined)
        .map((k) => ({ label: LABELS[k], values: [sys(k).rejected?.rps ?? null] })),
    },
    {
      title: `Latency at a fixed ${c.rate} req/s (lower is better)`,
      unit: 'ms',
      series: ['p50', 'p99'],
      colors: ['#9333ea', '#ea580c'],
      groups: keys.map((k) => ({
        label: LABELS[k],
        values: [sys(k).fixedRate?.p50 ?? null, sys(k).fixedRate?.p99 ?? null],
      })),
    },
  ];
  const m = c.machine;
  const mem = c.memory
    ? ` · ${c.memory.clients.toLocaleString('en')} clients: RSS ${c.memory.rssBeforeMB.toFixed(0)} → ${c.memory.rssAfterMB.toFixed(0)} MB`
    : '';
  const caption = `${m.cpu}, ${m.cores} cores, Node ${m.node}, Redis ${m.redis ?? '—'}, nginx ${m.nginx ?? '—'} · ${c.date.slice(0, 10)}${mem}`;
  return renderChart(panels, caption);
}

/** `--render FILE.json`: redraws the SVG next to a results file (after a chart change), without measuring. */
export function renderOnly(file: string): void {
  const j = JSON.parse(readFileSync(file, 'utf8')) as {
    systems: Partial<Record<SystemKey, SystemResult>>;
    settings: { connections: number; fixedRate: number };
    machine: Record<string, unknown>;
    memory: MemoryResult | null;
    generatedAt: string;
  };
  const out = file.replace(/\.json$/, '.svg');
  writeFileSync(
    out,
    chart({
      systems: j.systems,
      connections: j.settings.connections,
      rate: j.settings.fixedRate,
      machine: j.machine,
      memory: j.memory,
      date: j.generatedAt,
    }),
  );
  console.log(`wrote ${out}`);
}

/** Req/s and CPU µs per request of a system in this run's load scenarios, beside its instruction count. */
function loadFigures(k: InstrKey): string {
  if (k === 'rategate-redis-clients') {
    const m = results['rategate-redis']?.manyClients;
    return m
      ? `${fmtInt(m.rps)} | ${m.cpuUsSystem.toFixed(1)} | — | ${m.cpuUsRedis?.toFixed(1) ?? '—'}`
      : '— | — | — | —';
  }
  if (k === 'thin-dispatch' || k === 'thin-headers' || k === 'floor-429' || refusedRow(k)) return '— | — | — | —';
  const f = results[instrSystem(k)]?.forwarded;
  const c = f?.cpuUsPerRequest;
  if (!f || !c) return '— | — | — | —';
  return `${fmtInt(f.rps)} | ${c.system?.toFixed(1) ?? '—'} | ${c.upstream.toFixed(1)} | ${c.redis?.toFixed(1) ?? '—'}`;
}

/** Instructions per forwarded request (main thread, median of the runs) with their spread, GC and compile shares, and the load figures beside. */
export function instructionsTable(instructions: Partial<Record<InstrKey, InstructionsResult>>): string {
  const k = (x: number): string => `${(x / 1000).toFixed(1)}k`;
  const bare = instructions.thin?.main;
  const floor = instructions['floor-429']?.main;
  const first = Object.values(instructions)[0]!;
  const lines = [
    `Instructions per forwarded request, main thread (callgrind; ${first.warmup} requests uninstrumented first, an idle window, ${first.rewarm ?? 200} more, then ${first.runs[0]?.requests} measured, ` +
      `8 connections; idle timer work subtracted; median of ${first.runs.length} runs, each a fresh process; a 429 row per refused request, × its floor):`,
    '',
    '| system | main thread | × bare (429: × floor) | spread | runs | without GC, compile | GC (entries/run) | compile | timers subtracted (idle /s) | all threads (optimizing) | Redis calls/req | req/s | CPU µs itself | upstream | redis |',
    '|---|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const key of INSTR_ORDER) {
    const r = instructions[key];
    if (!r) continue;
    const med = (f: (x: InstructionsRun) => number): number =>
      [...r.runs.map(f)].sort((a, b) => a - b)[r.runs.length >> 1]!;
    const redis = r.runs[0]?.redisScriptCalls === undefined ? '—' : med((x) => x.redisScriptCalls!).toFixed(3);
    // A refused row against the 429 floor, a forwarded one against the bare forwarder.
    const base = refusedRow(key) ? floor : bare;
    lines.push(
      `| ${INSTR_LABELS[key]} | ${k(r.main)} | ${base && key !== 'thin' && key !== 'floor-429' ? (r.main / base).toFixed(2) : '1'} | ${(r.spread * 100).toFixed(1)} % | ` +
        `${r.runs.map((x) => k(x.main)).join(', ')} | ${k(r.steady)} | ${k(med((x) => x.gc))} (${med((x) => x.gcEntries)}) | ${k(med((x) => x.compile))} | ` +
        `${k(med((x) => x.timers))} (${k(med((x) => x.idlePerSecond))}) | ${k(med((x) => x.allThreads))} (${k(med((x) => x.optimizing ?? 0))}) | ${redis} | ${loadFigures(key)} |`,
    );
  }
  return lines.join('\n');
}

/** The lines after the tables: instructions, memory, Redis calls, mixed traffic, and the goals with their verdicts. */
export function printSummary(
  rs: Ratio[],
  instructions: Partial<Record<InstrKey, InstructionsResult>>,
  perClient: PerClientResult | null,
  memory: MemoryResult | null,
): void {
  if (Object.keys(instructions).length > 0) console.log(`${instructionsTable(instructions)}\n`);
  if (perClient) {
    console.log(
      `memory per distinct client (bench/memory-per-client.ts, ${perClient.clients.toLocaleString('en')} clients, in-process after a full GC): ` +
        `${perClient.rssBytesPerClient} B of RSS, ${perClient.heapBytesPerClient} B of heap + external; after the windows and a sweep ${perClient.heapBytesPerClientAfterExpiry} B left`,
    );
    const g = perClient.gateway;
    if (g) {
      console.log(
        `memory per distinct client through the gateway (bench/memory-gateway.ts, ${g.clients.toLocaleString('en')} IPv6 /64s, Mastodon table, full GC): ` +
          `${g.rssBytesPerClient} B of RSS a client (${g.bucketsPerClient} buckets); a bucket ${g.rssBytesPerBucket} B of RSS, ${g.heapBytesPerBucket} B of heap + external; a fresh process ${(g.startRssBytes / 2 ** 20).toFixed(0)} MB`,
      );
    }
  }
  for (const k of ['fastify', 'rategate-redis'] as const) {
    const r = results[k];
    if (r?.forwarded?.redisCallsPerRequest !== undefined) {
      const f = r.forwarded;
      const rj = r.rejected;
      console.log(
        `Redis per request, ${LABELS[k]}: forwarded ${f.redisScriptCallsPerRequest?.toFixed(3)} script calls (${f.redisCallsPerRequest!.toFixed(2)} commands incl. inside scripts), ` +
          `rejected ${rj?.redisScriptCallsPerRequest?.toFixed(3) ?? '—'} (${rj?.redisCallsPerRequest?.toFixed(2) ?? '—'})`,
      );
    }
  }
  for (const k of ORDER)
    if (results[k]?.mixed)
      console.log(`mixed seed traffic, ${LABELS[k]}: ${statusSummary(results[k]!.mixed!.statuses)}`);
  if (memory) {
    console.log(
      `memory, ${memory.clients.toLocaleString('en')} distinct clients through rategate memory: RSS ${memory.rssBeforeMB.toFixed(0)} → ${memory.rssAfterMB.toFixed(0)} MB ` +
        `(peak ${memory.rssPeakMB.toFixed(0)}; ≈ ${(((memory.rssAfterMB - memory.rssBeforeMB) * 2 ** 20) / memory.clients).toFixed(0)} bytes per client), ` +
        `heap used ${memory.heapUsedBeforeMB?.toFixed(0)} → ${memory.heapUsedAfterMB?.toFixed(0)} MB (no forced GC), ${memory.seconds.toFixed(0)} s at ${fmtInt(memory.rps)} req/s`,
    );
  }
  console.log(
    '\nissue 14 goals (one run, interleaved rounds; "by CPU": the throughput ratio the CPU table predicts, total(b) / total(a)):',
  );
  for (const r of rs) {
    const v =
      r.value === null ? 'n/a' : r.value.toFixed(r.name.includes('bytes') ? 0 : r.name.includes('commands') ? 3 : 2);
    const cpu = r.byCpu === undefined ? '' : r.byCpu === null ? '(by CPU: n/a)' : `(by CPU: ${r.byCpu.toFixed(2)})`;
    console.log(
      `  ${r.name.padEnd(62)} ${v.padStart(7)}  ${r.target.padEnd(12)} ${(r.pass === null ? `SKIP (${r.detail.slice(0, 80)})` : r.pass ? 'PASS' : 'MISS').padEnd(5)} ${cpu}`,
    );
  }
  const thin = results.thin?.forwarded?.rps;
  const fast = results.fastify?.forwarded?.rps;
  const ngx = results.nginx?.forwarded?.rps;
  const hap = results.haproxy?.forwarded?.rps;
  if (thin && fast) console.log(`  (reference: bare forwarder / fastify stack = ${(thin / fast).toFixed(2)})`);
  if (thin && ngx) console.log(`  (reference, not a goal: nginx / bare forwarder = ${(ngx / thin).toFixed(2)})`);
  if (thin && hap) console.log(`  (reference, not a goal: HAProxy / bare forwarder = ${(hap / thin).toFixed(2)})`);
}

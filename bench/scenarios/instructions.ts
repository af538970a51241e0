/**
 * @module Scenario `instructions`: instructions per forwarded request of the gateway process (perf stat, else callgrind).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { freePort, runScript, sleep, start, waitForPort } from '../lib/procs.js';
import { BENCH_CONFIG, LABELS, QUICK } from '../lib/settings.js';
import { env, startGateway, stopServer, type Server } from '../lib/systems.js';
import type { InstructionsResult } from '../lib/types.js';

/** `perf stat -e instructions` counts on this machine (not in most VMs, which hide the PMU). */
export function perfCountsInstructions(): boolean {
  const r = spawnSync('perf', ['stat', '-e', 'instructions', '-x,', 'true'], { encoding: 'utf8' });
  return !r.error && /^\d+,/m.test(r.stderr ?? '');
}

/**
 * Instructions per forwarded request of the gateway process: with perf where it counts, else under
 * `valgrind --tool=callgrind` (instrumentation switched on after start-up, counters zeroed after a
 * warm-up, so the count is the measured requests' only). About 50× slower than native: a few hundred
 * requests, 8 connections, each system started alone. Counts user-space instructions of every thread
 * (V8's compiler and GC threads too), none of the kernel's: socket syscalls show in the CPU table's
 * system time instead. Much steadier than req/s on a shared machine.
 */
export async function benchInstructions(key: 'thin' | 'rategate-memory' | 'rategate-redis', usePerf: boolean): Promise<InstructionsResult | null> {
  // V8 keeps optimizing (on threads callgrind also counts) for the first thousand requests or so.
  const warm = QUICK ? 300 : 1500;
  const measured = QUICK ? 300 : 500;
  const target = {
    path: `/api/v1/statuses/${env.fx.statusId}`,
    headers: { authorization: `Bearer ${env.fx.userToken}` },
    clients: 1,
    connections: 8,
    depth: 1,
  };
  if (key === 'rategate-redis') await env.redis!.flushall();
  // The dumps stay in bench/.build/callgrind/<system>/ for callgrind_annotate (native code and V8 builtins are named; JIT code is not).
  const cgDir = path.resolve('bench', '.build', 'callgrind', key);
  rmSync(cgDir, { recursive: true, force: true });
  mkdirSync(cgDir, { recursive: true });
  const wrap = usePerf
    ? []
    : ['valgrind', '--tool=callgrind', '--instr-atstart=no', '--separate-threads=yes', `--callgrind-out-file=${path.join(cgDir, 'callgrind.out.%p')}`];
  process.stdout.write(`${LABELS[key].padEnd(28)} instructions per request (${usePerf ? 'perf stat' : 'callgrind'}) … `);
  let server: Server;
  if (key === 'thin') {
    const port = await freePort();
    const proc = start('thin', wrap[0] ?? process.execPath, [
      ...wrap.slice(1),
      ...(wrap.length ? [process.execPath] : []),
      '--import',
      'tsx',
      'bench/thin-forwarder.ts',
      '--listen',
      `127.0.0.1:${port}`,
      '--upstream',
      env.upstreamUrl,
    ]);
    await waitForPort(proc, port, 300_000);
    server = { key, port, proc };
  } else server = await startGateway(key, BENCH_CONFIG, key === 'rategate-memory' ? 'memory' : env.redisUrl!, undefined, false, wrap);
  const pid = server.proc.pid;
  const control = (...args: string[]): void => {
    const r = spawnSync('callgrind_control', [...args, String(pid)], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`callgrind_control ${args.join(' ')}: ${r.stderr}`);
  };
  try {
    if (!usePerf) control('-i', 'on');
    await runScript('bench/million.ts', { port: server.port, n: warm, ...target }, 600_000);
    let count: number;
    let mainThread = NaN;
    if (usePerf) {
      const perf = start('perf', 'perf', ['stat', '-e', 'instructions', '-x,', '-p', String(pid)]);
      await sleep(200);
      await runScript('bench/million.ts', { port: server.port, n: measured, ...target }, 600_000);
      await perf.stop('SIGINT');
      count = Number(/^(\d+),/m.exec(perf.output())?.[1] ?? NaN);
    } else {
      control('-z');
      await runScript('bench/million.ts', { port: server.port, n: measured, ...target }, 600_000);
      const before = new Set(readdirSync(cgDir));
      control('-d');
      const until = Date.now() + 30_000;
      let files: string[] = [];
      while (files.length === 0 && Date.now() < until) {
        await sleep(200);
        files = readdirSync(cgDir).filter((f) => !before.has(f));
      }
      await sleep(1000);
      // --separate-threads: one file per thread, `…-01` the main thread (the event loop).
      count = 0;
      for (const f of readdirSync(cgDir).filter((x) => !before.has(x))) {
        const n = Number(/^totals:\s+(\d+)/m.exec(readFileSync(path.join(cgDir, f), 'utf8'))?.[1] ?? NaN);
        count += n;
        if (f.endsWith('-01')) mainThread = n;
      }
    }
    const perRequest = count / measured;
    const main = mainThread / measured;
    process.stdout.write(
      `${Number.isFinite(perRequest) ? `${(perRequest / 1000).toFixed(0)} k` : 'n/a'}${Number.isFinite(main) ? `, main thread ${(main / 1000).toFixed(0)} k` : ''} (${measured} requests after ${warm})\n`,
    );
    return Number.isFinite(perRequest)
      ? { tool: usePerf ? 'perf' : 'callgrind', requests: measured, perRequest, mainThreadPerRequest: Number.isFinite(main) ? main : null }
      : null;
  } finally {
    await stopServer(server);
  }
}

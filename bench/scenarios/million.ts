/**
 * @module Scenario `million`: RSS and heap of the memory gateway before and after N distinct clients.
 */
import { fmtInt, mb } from '../lib/format.js';
import { rssOf, runScript, sleep } from '../lib/procs.js';
import { CLIENTS, SEED_CONFIG } from '../lib/settings.js';
import { startGateway, stopServer } from '../lib/systems.js';
import type { MemoryResult } from '../lib/types.js';

export async function heapUsed(adminPort: number): Promise<number | null> {
  const text = await fetch(`http://127.0.0.1:${adminPort}/metrics`).then(
    (r) => r.text(),
    () => '',
  );
  const m = /^nodejs_heap_size_used_bytes\s+(\S+)/m.exec(text);
  return m ? Number(m[1]) / 2 ** 20 : null;
}

export async function benchMillion(): Promise<MemoryResult> {
  const gw = await startGateway('rategate-memory (clients)', SEED_CONFIG, 'memory');
  try {
    // Warm the process (JIT, pools) from one client, then measure the baseline.
    await runScript(
      'bench/million.ts',
      { port: gw.port, path: '/api/v1/statuses/1', n: 5000, offset: 1_500_000 },
      60_000,
    );
    await sleep(1000);
    const heapBefore = await heapUsed(gw.adminPort!);
    const rssBefore = rssOf(gw.proc.pid);
    let peak = rssBefore;
    const poll = setInterval(() => (peak = Math.max(peak, rssOf(gw.proc.pid))), 250);
    console.log(
      `rategate memory: ${CLIENTS.toLocaleString('en')} distinct clients (X-Forwarded-For), RSS before ${mb(rssBefore)} …`,
    );
    const r = await runScript<{ n: number; seconds: number; rps: number; statuses: Record<string, number> }>(
      'bench/million.ts',
      { port: gw.port, path: '/api/v1/statuses/1', n: CLIENTS, connections: 32, depth: 16 },
      15 * 60_000,
    );
    clearInterval(poll);
    await sleep(500);
    const rssAfter = rssOf(gw.proc.pid);
    const heapAfter = await heapUsed(gw.adminPort!);
    peak = Math.max(peak, rssAfter);
    const out: MemoryResult = {
      clients: r.n,
      path: 'GET /api/v1/statuses/1 (no such status: the upstream answers a small JSON 404; matches ip-access)',
      seconds: r.seconds,
      rps: r.rps,
      rssBeforeMB: rssBefore / 2 ** 20,
      rssAfterMB: rssAfter / 2 ** 20,
      rssPeakMB: peak / 2 ** 20,
      heapUsedBeforeMB: heapBefore,
      heapUsedAfterMB: heapAfter,
      statuses: r.statuses,
    };
    console.log(
      `  ${r.n.toLocaleString('en')} requests in ${r.seconds.toFixed(1)} s (${fmtInt(r.rps)} req/s), RSS ${mb(rssBefore)} → ${mb(rssAfter)} (peak ${mb(peak)}), heap ${heapBefore?.toFixed(0)} → ${heapAfter?.toFixed(0)} MB`,
    );
    return out;
  } finally {
    await stopServer(gw);
  }
}

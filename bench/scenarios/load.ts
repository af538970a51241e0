/**
 * @module Scenario `load`: interleaved rounds of forwarded (fixed concurrency), fixed-rate and rejected requests per system.
 */
import { fmtInt, fmtMs } from '../lib/format.js';
import { expectStatus, load, paced } from '../lib/measure.js';
import { LABELS, note, RATE, REDIS_SYSTEMS, results, ROUNDS, WARMUP, type SystemKey } from '../lib/settings.js';
import { env, type Server } from '../lib/systems.js';
import type { LoadResult, PacedResult } from '../lib/types.js';

export interface Rounds {
  forwarded: LoadResult[];
  fixedRate: PacedResult[];
  rejected: LoadResult[];
}
export const rounds: Partial<Record<SystemKey, Rounds>> = {};

/** One round of the forwarded, fixed-rate and (for limiters) rejected scenarios against a running system. */
export async function benchRound(key: SystemKey, port: number, round: number, server: Server | null): Promise<void> {
  if (server !== null && server.proc.child.exitCode !== null) {
    note(`${LABELS[key]} exited during the bench (${server.proc.child.exitCode}): ${server.proc.output().slice(-300)}`);
    return;
  }
  const rr = (rounds[key] ??= { forwarded: [], fixedRate: [], rejected: [] });
  const usesRedis = REDIS_SYSTEMS.has(key);
  // The first round warms each system up longer (JIT, pools); later rounds find it warm.
  const warmupSec = round === 0 ? WARMUP : 1;
  const statusPath = `/api/v1/statuses/${env.fx.statusId}`;
  process.stdout.write(`${`[${round + 1}/${ROUNDS}] ${LABELS[key]}`.padEnd(34)} forwarded `);
  const f = await load(port, statusPath, usesRedis, { warmupSec }, { system: server?.proc.pid ?? null, upstream: env.upstreamPid, redis: usesRedis ? env.redisPid : null });
  rr.forwarded.push(f);
  expectStatus(`${LABELS[key]} forwarded`, f.statuses, 200);
  const own = f.cpuUsPerRequest?.system;
  process.stdout.write(`${fmtInt(f.rps).padStart(7)} req/s${own !== undefined && own !== null ? ` (${own.toFixed(1)} µs CPU/req)` : ''}`);
  // The access-log variant is there for its forwarded throughput and CPU only.
  if (key === 'rategate-memory-log') {
    process.stdout.write('\n');
    return;
  }
  process.stdout.write(` · fixed ${RATE}/s `);
  const p = await paced(port, statusPath);
  rr.fixedRate.push(p);
  expectStatus(`${LABELS[key]} fixed rate`, p.statuses, 200);
  process.stdout.write(`p99 ${fmtMs(p.p99).padStart(6)} ms`);
  if (key !== 'direct' && key !== 'thin') {
    const rj = await load(port, '/api/v1/exhausted', usesRedis, { warmupSec });
    rr.rejected.push(rj);
    expectStatus(`${LABELS[key]} rejected`, rj.statuses, 429);
    process.stdout.write(` · rejected ${fmtInt(rj.rps).padStart(7)} req/s`);
  }
  process.stdout.write('\n');
}

/** Each figure from its best round: highest throughput; for the fixed rate, the lowest p99. */
export function pickBest(): void {
  for (const [key, rr] of Object.entries(rounds) as Array<[SystemKey, Rounds]>) {
    const r = results[key]!;
    const maxBy = <T>(xs: T[], f: (x: T) => number): T | undefined => xs.reduce<T | undefined>((a, x) => (a === undefined || f(x) > f(a) ? x : a), undefined);
    const fw = maxBy(rr.forwarded, (x) => x.rps);
    const fr = maxBy(rr.fixedRate, (x) => -x.p99);
    const rj = maxBy(rr.rejected, (x) => x.rps);
    if (fw) r.forwarded = fw;
    if (fr) r.fixedRate = fr;
    if (rj) r.rejected = rj;
  }
}

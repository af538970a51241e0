/**
 * @module Scenario `load`: interleaved rounds of the forwarded, fixed-rate and rejected scenarios per system,
 * and each figure from its best round.
 */
import { LABELS, note, results, ROUNDS, WARMUP, type SystemKey } from '../lib/settings.js';
import type { Server } from '../lib/systems.js';
import type { LoadResult, PacedResult } from '../lib/types.js';
import { fixedRate } from './fixed-rate.js';
import { forwarded } from './forwarded.js';
import { rejected } from './rejected.js';

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
  // The first round warms each system up longer (JIT, pools); later rounds find it warm.
  const warmupSec = round === 0 ? WARMUP : 1;
  process.stdout.write(`${`[${round + 1}/${ROUNDS}] ${LABELS[key]}`.padEnd(34)} forwarded `);
  rr.forwarded.push(await forwarded(key, port, warmupSec, server));
  // The access-log variant is there for its forwarded throughput and CPU only.
  if (key === 'rategate-memory-log') {
    process.stdout.write('\n');
    return;
  }
  rr.fixedRate.push(await fixedRate(key, port));
  if (key !== 'direct' && key !== 'thin') rr.rejected.push(await rejected(key, port, warmupSec));
  process.stdout.write('\n');
}

/** Each figure from its best round: highest throughput; for the fixed rate, the lowest p99. */
export function pickBest(): void {
  for (const [key, rr] of Object.entries(rounds) as Array<[SystemKey, Rounds]>) {
    const r = results[key]!;
    const maxBy = <T>(xs: T[], f: (x: T) => number): T | undefined =>
      xs.reduce<T | undefined>((a, x) => (a === undefined || f(x) > f(a) ? x : a), undefined);
    const fw = maxBy(rr.forwarded, (x) => x.rps);
    const fr = maxBy(rr.fixedRate, (x) => -x.p99);
    const rj = maxBy(rr.rejected, (x) => x.rps);
    if (fw) r.forwarded = fw;
    if (fr) r.fixedRate = fr;
    if (rj) r.rejected = rj;
  }
}

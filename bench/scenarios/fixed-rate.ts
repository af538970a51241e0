/**
 * @module Scenario fixed rate (part of `load`): open-loop requests at a fixed rate for latency
 * (bench/paced.ts: no coordinated omission).
 */
import { fmtMs } from '../lib/format.js';
import { expectStatus, paced } from '../lib/measure.js';
import { LABELS, RATE, type SystemKey } from '../lib/settings.js';
import type { PacedResult } from '../lib/types.js';
import { statusPath } from './forwarded.js';

export async function fixedRate(key: SystemKey, port: number): Promise<PacedResult> {
  process.stdout.write(` · fixed ${RATE}/s `);
  const p = await paced(port, statusPath());
  expectStatus(`${LABELS[key]} fixed rate`, p.statuses, 200);
  process.stdout.write(`p99 ${fmtMs(p.p99).padStart(6)} ms`);
  return p;
}

/**
 * @module Scenario rejected (part of `load`, limiters only): fixed concurrency on a path whose bucket
 * the warm-up exhausted, so every measured request is a 429.
 */
import { fmtInt } from '../lib/format.js';
import { expectStatus, load } from '../lib/measure.js';
import { LABELS, REDIS_SYSTEMS, type SystemKey } from '../lib/settings.js';
import type { LoadResult } from '../lib/types.js';

export async function rejected(key: SystemKey, port: number, warmupSec: number): Promise<LoadResult> {
  const rj = await load(port, '/api/v1/exhausted', REDIS_SYSTEMS.has(key), { warmupSec });
  expectStatus(`${LABELS[key]} rejected`, rj.statuses, 429);
  process.stdout.write(` · rejected ${fmtInt(rj.rps).padStart(7)} req/s`);
  return rj;
}

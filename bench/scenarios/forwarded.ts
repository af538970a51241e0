/**
 * @module Scenario forwarded (part of `load`): fixed concurrency on the status path, every request
 * forwarded, with the CPU time per request of the system, the upstream and redis-server.
 */
import { fmtInt } from '../lib/format.js';
import { expectStatus, load } from '../lib/measure.js';
import { LABELS, REDIS_SYSTEMS, type SystemKey } from '../lib/settings.js';
import { env, type Server } from '../lib/systems.js';
import type { LoadResult } from '../lib/types.js';

/** The target of the forwarded and fixed-rate scenarios: a public status of the fixtures. */
export const statusPath = (): string => `/api/v1/statuses/${env.fx.statusId}`;

export async function forwarded(
  key: SystemKey,
  port: number,
  warmupSec: number,
  server: Server | null,
): Promise<LoadResult> {
  const usesRedis = REDIS_SYSTEMS.has(key);
  const f = await load(
    port,
    statusPath(),
    usesRedis,
    { warmupSec },
    { system: server?.proc.pid ?? null, upstream: env.upstreamPid, redis: usesRedis ? env.redisPid : null },
  );
  expectStatus(`${LABELS[key]} forwarded`, f.statuses, 200);
  const own = f.cpuUsPerRequest?.system;
  process.stdout.write(
    `${fmtInt(f.rps).padStart(7)} req/s${own !== undefined && own !== null ? ` (${own.toFixed(1)} µs CPU/req)` : ''}`,
  );
  return f;
}

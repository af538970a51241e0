/**
 * @module Scenario `mixed`: the seed configuration under mixed traffic of 20 000 clients (reads, sign-ups, uploads, deletes).
 */
import { fmtInt, statusSummary } from '../lib/format.js';
import { load, mixSpec } from '../lib/measure.js';
import { LABELS, results, SEED_CONFIG, type SystemKey } from '../lib/settings.js';
import { env, startSystem, stopServer } from '../lib/systems.js';

export async function benchMixed(key: SystemKey, upstreamPort: number): Promise<void> {
  const r = results[key];
  if (!r || r.skipped !== undefined) return;
  if (key === 'rategate-redis') await env.redis!.flushall();
  const server = await startSystem(key, SEED_CONFIG);
  try {
    process.stdout.write(`${LABELS[key].padEnd(28)} mixed seed traffic … `);
    r.mixed = await load(server?.port ?? upstreamPort, '/', key === 'rategate-redis', { mix: mixSpec(), headers: {} });
    process.stdout.write(`${fmtInt(r.mixed.rps)} req/s, ${statusSummary(r.mixed.statuses)}\n`);
  } finally {
    await stopServer(server);
  }
}

/**
 * @module Scenario `profile`: the gateway under `node --cpu-prof` in the forwarded scenario, summarized by bench/top-profile.ts.
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fmtInt } from '../lib/format.js';
import { runScript } from '../lib/procs.js';
import { BENCH_CONFIG, CONNECTIONS, LABELS, note, PROFILE_SEC } from '../lib/settings.js';
import { env, startGateway, stopServer } from '../lib/systems.js';
import type { LoadResult } from '../lib/types.js';
import { summarize, type ProfileSummary } from '../top-profile.js';

export async function profileGateway(key: 'rategate-memory' | 'rategate-redis'): Promise<ProfileSummary | null> {
  const dir = path.resolve('bench', '.build', 'profiles', key);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  if (key === 'rategate-redis') await env.redis!.flushall();
  const gw = await startGateway(key, BENCH_CONFIG, key === 'rategate-memory' ? 'memory' : env.redisUrl!, dir);
  process.stdout.write(`${LABELS[key].padEnd(28)} under --cpu-prof, forwarded for ${PROFILE_SEC} s … `);
  try {
    const r = await runScript<LoadResult>(
      'bench/load.ts',
      { port: gw.port, path: `/api/v1/statuses/${env.fx.statusId}`, headers: { authorization: `Bearer ${env.fx.userToken}` }, connections: CONNECTIONS, durationSec: PROFILE_SEC, warmupSec: 1 },
      (PROFILE_SEC + 60) * 1000,
    );
    process.stdout.write(`${fmtInt(r.rps)} req/s (profiling slows it)\n`);
    // For bench/profile-diff.ts: how many requests the profile covers.
    writeFileSync(path.join(dir, 'load.json'), `${JSON.stringify({ requests: r.requests, rps: r.rps, seconds: PROFILE_SEC })}\n`);
  } finally {
    await stopServer(gw);
  }
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (file === undefined) {
    note(`${key}: no .cpuprofile written`);
    return null;
  }
  return summarize(path.join(dir, file), 25);
}

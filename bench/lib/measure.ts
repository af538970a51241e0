/**
 * @module One load run against a system, with its Redis command counts and each process's CPU time per request.
 */
import { cpuMsOfTree, runScript } from './procs.js';
import { CONNECTIONS, DURATION, note, QUICK, RATE, WARMUP } from './settings.js';
import { env } from './systems.js';
import type { CpuPerRequest, CpuPids, LoadResult, PacedResult } from './types.js';
import type { LoadSpec, MixSpec } from '../load.js';

export interface RedisCounts {
  /** Every command Redis executed, including those a Lua script ran. */
  all: number;
  /** EVAL/EVALSHA/FCALL: each is one client call (one round trip, pipelined or not). */
  scripts: number;
}

/** Commands executed so far, from INFO commandstats (the bench's own INFO/FLUSHALL/… excluded). */
export async function redisCalls(): Promise<RedisCounts> {
  const out = { all: 0, scripts: 0 };
  if (!env.redis) return out;
  const info = await env.redis.info('commandstats');
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    const name = m[1]!.split('|')[0]!;
    if (['info', 'ping', 'flushall', 'client', 'config', 'hello', 'select', 'command', 'script'].includes(name))
      continue;
    out.all += Number(m[2]);
    if (/^(eval|evalsha|eval_ro|evalsha_ro|fcall|fcall_ro)$/.test(name)) out.scripts += Number(m[2]);
  }
  return out;
}

export async function load(
  port: number,
  pathname: string,
  countRedis: boolean,
  extra: Partial<LoadSpec> = {},
  cpuOf?: CpuPids,
): Promise<LoadResult> {
  const spec: LoadSpec = {
    port,
    path: pathname,
    headers: { authorization: `Bearer ${env.fx.userToken}` },
    connections: CONNECTIONS,
    durationSec: DURATION,
    warmupSec: WARMUP,
    ...extra,
  };
  const snap: { before?: Promise<RedisCounts> } = {};
  const cpuSnap = (): number[] =>
    cpuOf
      ? [
          ...[cpuOf.system, cpuOf.upstream, cpuOf.redis].map((p) => (p === null ? 0 : cpuMsOfTree(p))),
          cpuOf.system === null ? 0 : cpuMsOfTree(cpuOf.system, 'user'),
        ]
      : [];
  let cpuBefore: number[] = [];
  let cpuAfter: number[] = [];
  const r = await runScript<LoadResult>('bench/load.ts', spec, (DURATION + WARMUP + 60) * 1000, (line) => {
    if (line === 'MEASURE') {
      cpuBefore = cpuSnap();
      if (countRedis) snap.before = redisCalls();
    }
    if (line === 'MEASURED') cpuAfter = cpuSnap();
  });
  if (countRedis && snap.before !== undefined) {
    const b = await snap.before;
    const a = await redisCalls();
    r.redisCallsPerRequest = r.requests > 0 ? (a.all - b.all) / r.requests : NaN;
    r.redisScriptCallsPerRequest = r.requests > 0 ? (a.scripts - b.scripts) / r.requests : NaN;
  }
  if (cpuOf && cpuAfter.length === 4 && r.requests > 0) {
    const per = (i: number): number => ((cpuAfter[i]! - cpuBefore[i]!) * 1000) / r.requests;
    const c: CpuPerRequest = {
      system: cpuOf.system === null ? null : per(0),
      systemUser: cpuOf.system === null ? null : per(3),
      systemKernel: cpuOf.system === null ? null : per(0) - per(3),
      upstream: per(1),
      redis: cpuOf.redis === null ? null : per(2),
      loadGenerator: ((r.loadGeneratorCpuMs ?? NaN) * 1000) / r.requests,
      total: 0,
    };
    c.total = (c.system ?? 0) + c.upstream + (c.redis ?? 0) + c.loadGenerator;
    r.cpuUsPerRequest = c;
  }
  return r;
}

export async function paced(port: number, pathname: string): Promise<PacedResult> {
  return runScript<PacedResult>(
    'bench/paced.ts',
    {
      port,
      path: pathname,
      headers: { authorization: `Bearer ${env.fx.userToken}` },
      rate: RATE,
      durationSec: DURATION,
      warmupSec: QUICK ? 0.5 : 1,
      connections: CONNECTIONS,
    },
    (DURATION + 70) * 1000,
  );
}

export function mixSpec(): MixSpec {
  return {
    statusId: env.fx.statusId,
    appToken: env.fx.appToken,
    userTokens: env.fx.userTokens,
    takenUsername: env.fx.takenUsername,
    ipPool: 20_000,
  };
}

/** Notes a scenario whose answers are not what it is meant to measure (so a wrong figure cannot pass unseen). */
export function expectStatus(what: string, statuses: Record<string, number>, code: number): void {
  const total = Object.values(statuses).reduce((a, b) => a + b, 0);
  const ok = statuses[String(code)] ?? 0;
  if (total === 0 || ok / total < 0.99) note(`${what}: expected ${code}, got ${JSON.stringify(statuses)}`);
}

/**
 * @module Scenario `clients`: many distinct clients, a few requests each (no hot key), CPU per request of each system.
 */
import { fmtInt } from '../lib/format.js';
import { cpuMsOfTree, runScript } from '../lib/procs.js';
import { CONNECTIONS, LABELS, MANY_CLIENTS, MANY_CLIENTS_EACH, results } from '../lib/settings.js';
import { env, startSystem, stopServer, unavailable } from '../lib/systems.js';

/**
 * The many-client scenario beside the hot-key one: MANY_CLIENTS distinct clients (X-Forwarded-For), a few
 * requests each, interleaved so that a client's requests are far apart (no key is hot: leases cannot
 * help, this is the store's per-request path). Each system alone, started fresh (Redis flushed).
 */
export async function benchManyClients(key: 'thin' | 'rategate-memory' | 'rategate-redis'): Promise<void> {
  // Also run with --skip load, which leaves the system without a result yet.
  const r = (results[key] ??= { label: LABELS[key] });
  if (r.skipped !== undefined || unavailable(key) !== null) return;
  if (key === 'rategate-redis') await env.redis!.flushall();
  const server = await startSystem(key);
  try {
    const port = server!.port;
    await runScript('bench/million.ts', { port, path: '/api/v1/statuses/1', n: 5000, offset: 1_500_000 }, 60_000);
    process.stdout.write(
      `${LABELS[key].padEnd(28)} ${MANY_CLIENTS.toLocaleString('en')} clients × ${MANY_CLIENTS_EACH} … `,
    );
    const pids = [server!.proc.pid, key === 'rategate-redis' ? env.redisPid : null];
    const before = pids.map((p) => (p === null ? 0 : cpuMsOfTree(p)));
    const m = await runScript<{ n: number; seconds: number; rps: number; statuses: Record<string, number> }>(
      'bench/million.ts',
      {
        port,
        path: '/api/v1/statuses/1',
        n: MANY_CLIENTS * MANY_CLIENTS_EACH,
        clients: MANY_CLIENTS,
        connections: CONNECTIONS,
        depth: 16,
      },
      15 * 60_000,
    );
    const per = (i: number): number => ((cpuMsOfTree(pids[i]!) - before[i]!) * 1000) / m.n;
    r.manyClients = {
      clients: MANY_CLIENTS,
      requests: m.n,
      rps: m.rps,
      statuses: m.statuses,
      cpuUsSystem: per(0),
      cpuUsRedis: pids[1] === null ? null : per(1),
    };
    process.stdout.write(
      `${fmtInt(m.rps)} req/s, ${r.manyClients.cpuUsSystem.toFixed(1)} µs CPU/req${r.manyClients.cpuUsRedis === null ? '' : ` + redis ${r.manyClients.cpuUsRedis.toFixed(1)}`}\n`,
    );
  } finally {
    await stopServer(server);
  }
}

/**
 * @module `serve --workers N`: node:cluster workers share the proxy port; the primary owns the built-in
 * upstream (one set of records for all workers), the admin listener (metrics aggregated from every
 * worker), and restarts workers that die. Only with a shared store: with the memory store each worker
 * would count alone and a limit of N would admit N × workers, so that combination is refused.
 */
import { RategateError } from '../errors.js';
import cluster from 'node:cluster';
import os from 'node:os';
import { AggregatorRegistry } from 'prom-client';
import type { Logger } from 'pino';
import { loadConfigFile, parseHostPort, type ConfigOverrides } from '../config/index.js';
import { startUpstream, type RunningUpstream } from '../mastodon/index.js';
import { createAdminServer } from '../admin/server.js';
import { listenOn, urlOf } from '../http/listener.js';
import { startupLog } from '../observability/log.js';
import { backendFor } from '../limiter/backends/index.js';

export function workerCount(value: string): number | null {
  if (value === 'auto') return Math.max(1, os.availableParallelism());
  const n = Number(value);
  return Number.isInteger(n) && n >= 1 && n <= 256 ? n : null;
}

export class WorkersRefused extends RategateError {
  readonly code = 'WORKERS_REFUSED';
}

/** Runs the primary until SIGTERM/SIGINT; resolves with the exit code. */
export async function runPrimary(opts: {
  workers: number;
  configPath: string;
  overrides: ConfigOverrides;
  log: Logger;
  waitForSignal: () => Promise<void>;
}): Promise<number> {
  const { log } = opts;
  const snapshot = await loadConfigFile(opts.configPath, opts.overrides);
  const cfg = snapshot.config;
  log.level = cfg.log.level;
  if (!backendFor(cfg.store.url).can.shared) {
    throw new WorkersRefused(
      `--workers ${opts.workers} needs a shared store: with store.url memory every worker would count on its own and admit up to ${opts.workers}× each limit. Use --store redis://… (or one worker per process and several replicas behind Redis).`,
    );
  }

  let builtin: RunningUpstream | undefined;
  const env: Record<string, string> = { RATEGATE_WORKER: '1', RATEGATE_CONFIG: opts.configPath };
  if (cfg.upstream.url === 'builtin') {
    builtin = await startUpstream({ host: '127.0.0.1', port: 0 });
    // Wins over a worker's own --upstream flag: all workers must share the primary's records.
    env.RATEGATE_WORKER_UPSTREAM = builtin.url;
  }
  // Workers run this same command line, so they parse the same flags and environment.

  let stopping = false;
  const fork = () => cluster.fork(env);
  // Ready means serving: a worker counts once its proxy listener is up, not when it was forked.
  const listening = new Set<number>();
  cluster.on('listening', (worker) => listening.add(worker.id));
  cluster.on('exit', (worker, code, signal) => {
    listening.delete(worker.id);
    if (stopping) return;
    log.error({ pid: worker.process.pid, code, signal }, 'worker died; starting another');
    setTimeout(fork, 500).unref();
  });
  for (let i = 0; i < opts.workers; i++) fork();

  // The same admin router as a single process: /metrics summed over the workers, no /admin/* API.
  const aggregator = new AggregatorRegistry();
  const admin = createAdminServer({
    metrics: { contentType: aggregator.contentType, metrics: () => aggregator.clusterMetrics() },
    health: () => ({ workers: listening.size }),
    ready: async () => {
      const checks = { workers: listening.size > 0, serving: !stopping };
      return {
        ready: checks.workers && checks.serving,
        checks,
        details: { workers: listening.size, wanted: opts.workers },
      };
    },
  });
  const adminAt = parseHostPort(cfg.admin.listen)!;
  await listenOn(admin, adminAt.host, adminAt.port);
  // The bound address, not the configured one: with port 0 it says which port was chosen.
  const adminUrl = urlOf(admin);
  startupLog(log).info(
    { workers: opts.workers, admin: adminUrl },
    `rategate primary: ${opts.workers} workers, admin on ${adminUrl}`,
  );

  await opts.waitForSignal();
  stopping = true;
  await stopWorkers();
  await new Promise<void>((resolve) => admin.close(() => resolve()));
  await builtin?.close();
  return 0;
}

/** SIGTERM to every worker; resolves once all have exited. */
async function stopWorkers(): Promise<void> {
  const workers = Object.values(cluster.workers ?? {}).filter((w) => w !== undefined);
  await Promise.all(
    workers.map(
      (w) =>
        new Promise<void>((resolve) => {
          w.once('exit', () => resolve());
          w.process.kill('SIGTERM');
        }),
    ),
  );
}

/** In a worker: answer the primary's metric requests from this worker's registry. */
export function serveWorkerMetrics(registry: import('prom-client').Registry): void {
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([registry]);
}

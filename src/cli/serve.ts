/** @module `rategate serve` (the gateway, one process or node:cluster workers) and `rategate upstream` (the built-in API alone). */
import { parseHostPort } from '../config/fields/validators.js';
import { createProcessLogger } from '../observability/log.js';
import { CONFIG_FLAG, configPath, OVERRIDE_FLAGS, overridesFrom, parse, waitForSignal } from './options.js';
import { logStartFailure, logStartRefusal } from './start-failure.js';
import { USAGE } from './usage.js';

export async function serve(args: string[]): Promise<number> {
  const { values } = parse(args, { ...CONFIG_FLAG, ...OVERRIDE_FLAGS, workers: { type: 'string' } });
  if (values.help) return (console.log(USAGE), 0);
  const logger = createProcessLogger();
  const workersFlag = typeof values.workers === 'string' ? values.workers : '1';
  const { workerCount, runPrimary, WorkersRefused, serveWorkerMetrics } = await import('../app/workers.js');
  const workers = workerCount(workersFlag);
  if (workers === null) {
    logStartRefusal(logger, 'usage', `--workers: expected a number from 1 to 256 or "auto", got "${workersFlag}"`);
    return 1;
  }
  const isWorker = process.env.RATEGATE_WORKER === '1';
  if (workers > 1 && !isWorker) {
    try {
      return await runPrimary({ workers, configPath: configPath(values), overrides: overridesFrom(values), log: logger, waitForSignal });
    } catch (err) {
      if (err instanceof WorkersRefused) {
        logStartRefusal(logger, 'workers', err.message);
        return 1;
      }
      if (logStartFailure(logger, err)) return 1;
      throw err;
    }
  }
  const { startGateway } = await import('../app/start.js');
  let gateway;
  try {
    const overrides = overridesFrom(values);
    if (isWorker && process.env.RATEGATE_WORKER_UPSTREAM) overrides.upstream = process.env.RATEGATE_WORKER_UPSTREAM;
    gateway = await startGateway({ configPath: configPath(values), overrides, logger, admin: !isWorker });
    if (isWorker) serveWorkerMetrics(gateway.metrics.registry);
  } catch (err) {
    // Start-up failures are JSON lines on the log, with their place (start-failure.ts).
    if (logStartFailure(logger, err)) return 1;
    throw err;
  }
  await waitForSignal();
  await gateway.shutdown();
  return 0;
}

export async function upstream(args: string[]): Promise<number> {
  const { values } = parse(args, { listen: { type: 'string' } });
  if (values.help) return (console.log(USAGE), 0);
  const listen = parseHostPort(typeof values.listen === 'string' ? values.listen : '127.0.0.1:3000');
  if (!listen) {
    console.error(`rategate: --listen: invalid address "${String(values.listen)}" (use HOST:PORT)`);
    return 1;
  }
  const { startUpstream } = await import('../mastodon/index.js');
  const running = await startUpstream({ host: listen.host, port: listen.port });
  console.log(`rategate built-in upstream listening on ${running.url}`);
  await waitForSignal();
  await running.close();
  return 0;
}

/** @module `rategate serve` (the gateway, one process or node:cluster workers) and `rategate upstream` (the built-in API alone). */
import { parseHostPort } from '../config/fields/validators.js';
import { createProcessLogger } from '../observability/log.js';
import { COMMANDS } from './commands.js';
import { EXIT } from './exit.js';
import { configPath, overridesFrom, parse, printHelp, usageError, waitForSignal } from './options.js';
import { startFailure, logStartRefusal } from './start-failure.js';
import type { Logger } from 'pino';
import { tracingFromEnv, type TracingSettings } from '../observability/tracing-env.js';
import type { RequestTracing } from '../observability/tracing.js';

export async function serve(args: string[]): Promise<number> {
  const { values } = parse(args, COMMANDS.serve.flags);
  if (values.help) return printHelp('serve');
  const workersFlag = typeof values.workers === 'string' ? values.workers : '1';
  const { workerCount, runPrimary, WorkersRefused, serveWorkerMetrics } = await import('../app/workers.js');
  const workers = workerCount(workersFlag);
  if (workers === null)
    return usageError('serve', `--workers: expected a number from 1 to 256 or "auto", got "${workersFlag}"`);
  // Read before any worker starts (a bad variable stops the primary); each serving process starts its own SDK.
  const traces = tracingFromEnv(process.env);
  if (typeof traces === 'string') {
    console.error(`rategate: ${traces}`);
    return EXIT.CONFIG;
  }
  const logger = createProcessLogger();
  const isWorker = process.env.RATEGATE_WORKER === '1';
  if (workers > 1 && !isWorker) {
    try {
      return await runPrimary({
        workers,
        configPath: configPath(values),
        overrides: overridesFrom(values),
        log: logger,
        waitForSignal,
      });
    } catch (err) {
      if (err instanceof WorkersRefused) {
        logStartRefusal(logger, 'workers', err.message);
        return EXIT.CONFIG;
      }
      return startFailure(logger, err);
    }
  }
  const { startGateway } = await import('../app/start.js');
  const tracing = await startTracingFor(traces, logger);
  let gateway;
  try {
    const overrides = overridesFrom(values);
    if (isWorker && process.env.RATEGATE_WORKER_UPSTREAM) overrides.upstream = process.env.RATEGATE_WORKER_UPSTREAM;
    gateway = await startGateway({ configPath: configPath(values), overrides, logger, admin: !isWorker, tracing });
    if (isWorker) serveWorkerMetrics(gateway.metrics.registry);
  } catch (err) {
    // Start-up failures are JSON lines on the log, with their place and their exit code (start-failure.ts).
    return startFailure(logger, err);
  }
  await waitForSignal();
  await gateway.shutdown();
  await tracing?.shutdown(); // the last requests' spans, still batched
  return EXIT.OK;
}

/** The SDK, loaded only when tracing is on: a gateway without it loads no OpenTelemetry module. */
async function startTracingFor(settings: TracingSettings | null, log: Logger): Promise<RequestTracing | undefined> {
  if (settings === null) return undefined;
  const { startTracing } = await import('../observability/tracing-sdk.js');
  const tracing = await startTracing(settings, (message) => log.warn(message));
  const otlp = settings.exporters.includes('otlp') ? ` (OTLP ${settings.protocol})` : '';
  log.info({ tracing: settings }, `tracing on: spans to ${settings.exporters.join(', ')}${otlp}`);
  return tracing;
}

export async function upstream(args: string[]): Promise<number> {
  const { values } = parse(args, COMMANDS.upstream.flags);
  if (values.help) return printHelp('upstream');
  const listen = parseHostPort(typeof values.listen === 'string' ? values.listen : '127.0.0.1:3000');
  if (!listen) return usageError('upstream', `--listen: invalid address "${String(values.listen)}" (use HOST:PORT)`);
  const { startUpstream } = await import('../mastodon/index.js');
  let running;
  try {
    running = await startUpstream({ host: listen.host, port: listen.port });
  } catch (err) {
    return startFailure(createProcessLogger(), err);
  }
  console.log(`rategate built-in upstream listening on ${running.url}`);
  await waitForSignal();
  await running.close();
  return EXIT.OK;
}

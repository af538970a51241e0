#!/usr/bin/env node
/** @module The command line: `serve`, `check`, `explain`, `upstream`, and the admin clients `block`, `exempt`, `bans` (cli/guard.ts). The only place that calls process.exit. */
import { parseArgs } from 'node:util';
import { ConfigError, formatRulesTable, formatSummary, loadConfigFile, parseHostPort, type ConfigOverrides } from '../config/index.js';
import { createProcessLogger } from '../observability/log.js';
import { VERSION } from '../observability/version.js';
import { GUARD_USAGE } from './guard.js';

const USAGE = `Usage:
  rategate serve    [--config FILE] [--listen HOST:PORT] [--admin-listen HOST:PORT]
                    [--upstream URL|builtin] [--store memory|URL] [--workers N|auto]
  rategate check    [--config FILE | FILE]
  rategate explain  [--config FILE] "METHOD /path?query" [-H "Name: value"]… [--ip IP] [--body "a=b"] [--account ID|none]
  rategate upstream [--listen HOST:PORT]
${GUARD_USAGE}
  rategate --version

Environment (flags win): RATEGATE_CONFIG, RATEGATE_LISTEN, RATEGATE_ADMIN_LISTEN, RATEGATE_UPSTREAM, RATEGATE_STORE,
RATEGATE_LOG_LEVEL (wins over the file's log.level); check applies them as serve does.
RATEGATE_ADMIN_TOKEN (the admin API's bearer token); RATEGATE_ADMIN_URL (block, exempt, bans: default http://127.0.0.1:9464).
Default config: config/limits.yaml.`;

const DEFAULT_CONFIG = 'config/limits.yaml';

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'serve':
      return serve(rest);
    case 'check':
      return check(rest);
    case 'upstream':
      return upstream(rest);
    case 'explain':
      return explainCommand(rest);
    case 'block':
    case 'exempt':
    case 'bans': {
      const { guardCommand } = await import('./guard.js');
      return guardCommand(command, rest);
    }
    case '--version':
    case '-v':
    case 'version':
      console.log(VERSION);
      return 0;
    case undefined:
    case '-h':
    case '--help':
    case 'help':
      console.log(USAGE);
      return command === undefined ? 1 : 0;
    default:
      console.error(`rategate: unknown command "${command}"\n\n${USAGE}`);
      return 1;
  }
}

type Options = Record<string, { type: 'string' | 'boolean'; short?: string }>;

/** Parses flags strictly: an unknown flag is an error, not silently ignored. */
function parse(args: string[], options: Options): { values: Record<string, string | boolean | undefined> } {
  const { values } = parseArgs({ args, options: { ...options, help: { type: 'boolean', short: 'h' } }, strict: true, allowPositionals: false });
  return { values: values as Record<string, string | boolean | undefined> };
}

/** Environment first, then flags on top: flags win. */
function overridesFrom(values: Record<string, unknown>): ConfigOverrides {
  const env = process.env;
  const o: ConfigOverrides = {};
  const pick = (flag: unknown, envName: string): string | undefined =>
    typeof flag === 'string' ? flag : env[envName] !== undefined && env[envName] !== '' ? env[envName] : undefined;
  const listen = pick(values.listen, 'RATEGATE_LISTEN');
  const adminListen = pick(values['admin-listen'], 'RATEGATE_ADMIN_LISTEN');
  const up = pick(values.upstream, 'RATEGATE_UPSTREAM');
  const store = pick(values.store, 'RATEGATE_STORE');
  const logLevel = pick(undefined, 'RATEGATE_LOG_LEVEL');
  if (logLevel !== undefined) o.logLevel = logLevel;
  if (listen !== undefined) o.listen = listen;
  if (adminListen !== undefined) o.adminListen = adminListen;
  if (up !== undefined) o.upstream = up;
  if (store !== undefined) o.store = store;
  // Environment only (a flag would show the secret in `ps`). Trimmed like admin.tokenFile: a Secret
  // written with a trailing newline must not make every correct token a 401.
  const adminToken = env.RATEGATE_ADMIN_TOKEN?.trim();
  if (adminToken !== undefined && adminToken !== '') o.adminToken = adminToken;
  return o;
}

function configPath(values: Record<string, unknown>): string {
  return typeof values.config === 'string' ? values.config : process.env.RATEGATE_CONFIG || DEFAULT_CONFIG;
}

function reportConfigError(err: unknown): number {
  if (err instanceof ConfigError) {
    console.error(err.message);
    return 1;
  }
  throw err;
}

async function check(args: string[]): Promise<number> {
  // `rategate check FILE` reads as naturally as `--config FILE`; one file either way.
  const { values, positionals } = parseArgs({
    args,
    options: { config: { type: 'string', short: 'c' }, help: { type: 'boolean', short: 'h' } },
    strict: true,
    allowPositionals: true,
  });
  if (values.help) return (console.log(USAGE), 0);
  if (positionals.length > 1 || (positionals.length === 1 && values.config !== undefined)) {
    console.error(`rategate: check takes one config file (got ${[values.config, ...positionals].filter(Boolean).join(', ')})\n\n${USAGE}`);
    return 1;
  }
  const file = positionals[0] ?? configPath(values);
  try {
    // Exactly what serve would load: the same file with the same RATEGATE_* overrides.
    const snapshot = await loadConfigFile(file, overridesFrom(values));
    console.log(formatRulesTable(snapshot));
    console.log(formatSummary(snapshot));
    return 0;
  } catch (err) {
    return reportConfigError(err);
  }
}

/** Which rules a request would be counted by, and why the others would not count it. */
async function explainCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    options: {
      config: { type: 'string', short: 'c' },
      header: { type: 'string', short: 'H', multiple: true },
      ip: { type: 'string' },
      body: { type: 'string' },
      account: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
    allowPositionals: true,
  });
  if (values.help) return (console.log(USAGE), 0);
  if (positionals.length !== 1) {
    console.error(`rategate explain: expected one request, e.g. "POST /auth/password?x=1"\n\n${USAGE}`);
    return 1;
  }
  const { explain } = await import('./explain.js');
  try {
    const snapshot = await loadConfigFile(configPath(values));
    const lines = await explain(snapshot, {
      request: positionals[0]!,
      headers: values.header ?? [],
      ip: values.ip ?? '192.0.2.1',
      body: values.body,
      account: values.account,
    });
    console.log(lines.join('\n'));
    return 0;
  } catch (err) {
    if (err instanceof ConfigError) return reportConfigError(err);
    if (err instanceof Error) {
      console.error(`rategate explain: ${err.message}`);
      return 1;
    }
    throw err;
  }
}

async function serve(args: string[]): Promise<number> {
  const { values } = parse(args, {
    config: { type: 'string', short: 'c' },
    listen: { type: 'string' },
    'admin-listen': { type: 'string' },
    upstream: { type: 'string' },
    store: { type: 'string' },
    workers: { type: 'string' },
  });
  if (values.help) return (console.log(USAGE), 0);
  const logger = createProcessLogger();
  const workersFlag = typeof values.workers === 'string' ? values.workers : '1';
  const { workerCount, runPrimary, WorkersRefused, serveWorkerMetrics } = await import('../app/workers.js');
  const workers = workerCount(workersFlag);
  if (workers === null) {
    console.error(`rategate: --workers: expected a number from 1 to 256 or "auto", got "${workersFlag}"`);
    return 1;
  }
  const isWorker = process.env.RATEGATE_WORKER === '1';
  if (workers > 1 && !isWorker) {
    try {
      return await runPrimary({ workers, configPath: configPath(values), overrides: overridesFrom(values), log: logger, waitForSignal });
    } catch (err) {
      if (err instanceof WorkersRefused) {
        console.error(`rategate: ${err.message}`);
        return 1;
      }
      if (err instanceof ConfigError) return reportConfigError(err);
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
    if (err instanceof ConfigError) return reportConfigError(err);
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'EADDRINUSE' || e.code === 'EACCES') {
      console.error(`rategate: cannot listen: ${e.message}`);
      return 1;
    }
    throw err;
  }
  await waitForSignal();
  await gateway.shutdown();
  return 0;
}

async function upstream(args: string[]): Promise<number> {
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

function waitForSignal(): Promise<void> {
  return new Promise((resolve) => {
    const done = () => resolve();
    process.once('SIGTERM', done);
    process.once('SIGINT', done);
  });
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    // Bad flags are the user's error: say so plainly, with the usage.
    if ((err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      console.error(`rategate: ${(err as Error).message}\n\n${USAGE}`);
      process.exit(1);
    }
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    process.exit(1);
  },
);

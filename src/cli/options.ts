/**
 * @module What the commands share: strict flag parsing (with -h), and for those that read a config the
 * RATEGATE_* overrides (environment, then flags), the config path, and how a config error is reported
 * (one line for a file that cannot be read, every error with its place otherwise).
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ConfigError, ConfigFileUnreadable } from '../config/errors.js';
import type { ConfigOverrides } from '../config/load.js';
import type { CommandName } from './commands.js';
import { EXIT } from './exit.js';
import { commandUsage } from './usage.js';

export const DEFAULT_CONFIG = 'config/limits.yaml';

type Options = Record<string, { type: 'string' | 'boolean'; short?: string }>;

/** Every command takes -h / --help. */
const HELP = { help: { type: 'boolean', short: 'h' } } as const;

/** Parses flags strictly: an unknown flag is an error, not silently ignored. */
export function parse(args: string[], options: Options): { values: Record<string, string | boolean | undefined> } {
  const { values } = parseArgs({ args, options: { ...options, ...HELP }, strict: true, allowPositionals: false });
  return { values: values as Record<string, string | boolean | undefined> };
}

type CommandConfig<O> = { args: string[]; options: O & typeof HELP; strict: true; allowPositionals: true };

/** Parses a command's flags strictly, as `parse` does, and its positional arguments; the values keep their flag types. */
export function parseCommand<O extends NonNullable<ParseArgsConfig['options']>>(
  args: string[],
  options: O,
): ReturnType<typeof parseArgs<CommandConfig<O>>> {
  return parseArgs<CommandConfig<O>>({ args, options: { ...options, ...HELP }, strict: true, allowPositionals: true });
}

/** A secret from the environment only (a flag would show it in `ps`), trimmed: a Secret written with a trailing newline must still match. */
function secretFromEnv(name: string): string | undefined {
  const value = process.env[name]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

/** The flags that override the config file, each over its RATEGATE_* variable (overridesFrom reads them). */
export const OVERRIDE_FLAGS = {
  listen: { type: 'string' },
  'admin-listen': { type: 'string' },
  upstream: { type: 'string' },
  store: { type: 'string' },
} as const;

/** Environment first, then flags on top: flags win. */
export function overridesFrom(values: Record<string, unknown>): ConfigOverrides {
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
  const adminToken = secretFromEnv('RATEGATE_ADMIN_TOKEN');
  if (adminToken !== undefined) o.adminToken = adminToken;
  const sentinelPassword = secretFromEnv('RATEGATE_STORE_SENTINEL_PASSWORD');
  if (sentinelPassword !== undefined) o.sentinelPassword = sentinelPassword;
  return o;
}

export function configPath(values: Record<string, unknown>): string {
  return typeof values.config === 'string' ? values.config : process.env.RATEGATE_CONFIG || DEFAULT_CONFIG;
}

/** A config error as a person reads it (one line for an unreadable file); serve logs it, the other commands print it. */
export function configErrorText(err: ConfigError): string {
  if (err instanceof ConfigFileUnreadable) {
    // One line: a missing file has nothing else to report, and the usual cause is the folder it ran in.
    const hint =
      err.file === DEFAULT_CONFIG
        ? ` (the default, under ${process.cwd()}: give --config FILE or set RATEGATE_CONFIG)`
        : '';
    return `rategate: cannot read the config file ${err.file}: ${err.why}${hint}`;
  }
  return err.message;
}

/** Prints a config error and returns the exit code; anything else is rethrown. */
export function reportConfigError(err: unknown): number {
  if (err instanceof ConfigError) {
    console.error(configErrorText(err));
    return EXIT.CONFIG;
  }
  throw err;
}

/** Prints a usage error with the command's own usage; returns EX_USAGE. */
export function usageError(command: CommandName, message: string): number {
  console.error(`rategate ${command}: ${message}\n\n${commandUsage(command)}`);
  return EXIT.USAGE;
}

/** `--help`: the command's own usage on stdout; returns 0. */
export function printHelp(command: CommandName): number {
  console.log(commandUsage(command));
  return EXIT.OK;
}

export function waitForSignal(): Promise<void> {
  return new Promise((resolve) => {
    const done = () => resolve();
    process.once('SIGTERM', done);
    process.once('SIGINT', done);
  });
}

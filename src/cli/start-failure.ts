/**
 * @module Why `serve` could not start, as one JSON line on the log (level fatal) rather than plain text:
 * a log pipeline keeps it with the rest, and its fields say where the fault is (the config file, the
 * line and column of a YAML error, the address that could not be bound). `msg` stays the sentence a
 * person reads.
 */
import type { Logger } from 'pino';
import { ConfigError } from '../config/errors.js';
import { hasCode } from '../errors.js';
import { EXIT } from './exit.js';
import { configErrorText } from './options.js';

/** What a listener cannot have: the address taken, not allowed, or not this host's. */
const CANNOT_LISTEN = new Set(['EADDRINUSE', 'EACCES', 'EADDRNOTAVAIL']);

/** `line L, column C: …`, as config/load.ts writes a YAML error's place. */
const PLACE = /^line (\d+), column (\d+): /;

/**
 * Logs a start-up failure and returns its exit code (sysexits: a config error 78, a listener or store it
 * cannot have 69); an error that is not one (a bug) is rethrown.
 */
export function startFailure(log: Logger, err: unknown): number {
  if (err instanceof ConfigError) {
    const place = err.errors.map((e) => PLACE.exec(e)).find((m) => m !== null);
    const fields = {
      failure: 'config',
      file: err.source,
      errors: err.errors,
      ...(place ? { line: Number(place[1]), column: Number(place[2]) } : {}),
    };
    log.fatal(fields, configErrorText(err));
    return EXIT.CONFIG;
  }
  const e = err as NodeJS.ErrnoException & { address?: string; port?: number };
  if (e.code !== undefined && CANNOT_LISTEN.has(e.code)) {
    log.fatal(
      { failure: 'listen', code: e.code, address: e.address, port: e.port },
      `rategate: cannot listen: ${e.message}`,
    );
    return EXIT.UNAVAILABLE;
  }
  if (hasCode(err, 'STORE_UNAVAILABLE') || hasCode(err, 'STORE_TIMEOUT')) {
    log.fatal({ failure: 'store', code: e.code }, `rategate: the store cannot be reached: ${(err as Error).message}`);
    return EXIT.UNAVAILABLE;
  }
  throw err;
}

/** A failure with no more place than its words (a bad flag value, refused workers). */
export function logStartRefusal(log: Logger, failure: string, message: string): void {
  log.fatal({ failure }, `rategate: ${message}`);
}

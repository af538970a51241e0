/**
 * @module Why `serve` could not start, as one JSON line on the log (level fatal) rather than plain text:
 * a log pipeline keeps it with the rest, and its fields say where the fault is (the config file, the
 * line and column of a YAML error, the address that could not be bound). `msg` stays the sentence a
 * person reads.
 */
import type { Logger } from 'pino';
import { ConfigError } from '../config/errors.js';
import { configErrorText } from './options.js';

/** `line L, column C: …`, as config/load.ts writes a YAML error's place. */
const PLACE = /^line (\d+), column (\d+): /;

/** Logs a start-up failure and returns true, or returns false for an error that is not one (a bug: rethrown by the caller). */
export function logStartFailure(log: Logger, err: unknown): boolean {
  if (err instanceof ConfigError) {
    const place = err.errors.map((e) => PLACE.exec(e)).find((m) => m !== null);
    const fields = { failure: 'config', file: err.source, errors: err.errors, ...(place ? { line: Number(place[1]), column: Number(place[2]) } : {}) };
    log.fatal(fields, configErrorText(err));
    return true;
  }
  const e = err as NodeJS.ErrnoException & { address?: string; port?: number };
  if (e.code === 'EADDRINUSE' || e.code === 'EACCES' || e.code === 'EADDRNOTAVAIL') {
    log.fatal({ failure: 'listen', code: e.code, address: e.address, port: e.port }, `rategate: cannot listen: ${e.message}`);
    return true;
  }
  return false;
}

/** A failure with no more place than its words (a bad flag value, refused workers). */
export function logStartRefusal(log: Logger, failure: string, message: string): void {
  log.fatal({ failure }, `rategate: ${message}`);
}

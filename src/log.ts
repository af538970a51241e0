/**
 * @module The process logger: pino JSON lines on stdout through a buffered destination, so the access
 * log costs a string append per request instead of a write(2). Lines reach stdout when 4 kB are
 * buffered, at the latest after FLUSH_MS, when the gateway drains, and on exit (pino's destination
 * flushes synchronously on process exit), so no line is lost on SIGTERM.
 */
import { pino, type Logger } from 'pino';

/** Upper bound on how long a line waits in the buffer on a quiet gateway. */
const FLUSH_MS = 250;
const BUFFER_BYTES = 4096;

/** Starts at `info` until the config is read: the gateway then applies the one level rule (app.ts). */
export function createProcessLogger(level = 'info'): Logger {
  const dest = pino.destination({ dest: 1, minLength: BUFFER_BYTES, sync: false });
  setInterval(() => dest.flush(), FLUSH_MS).unref();
  return pino({ level }, dest);
}

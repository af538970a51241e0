/**
 * @module The process logger: pino JSON lines on stdout through a buffered destination, so an access
 * line costs its serialization and a string append instead of a write(2) each. Lines reach stdout when
 * BUFFER_CHARS are buffered, at the latest after FLUSH_MS, when the gateway drains (app/start.ts calls
 * `flush`), and on process exit, so no line is lost on SIGTERM.
 */
import { writeSync } from 'node:fs';
import { pino, type Logger, type LoggerOptions } from 'pino';

/** Upper bound on how long a line waits in the buffer on a quiet gateway. */
const FLUSH_MS = 250;
const BUFFER_CHARS = 32 * 1024;

/**
 * A write-behind buffer over a file descriptor, written synchronously when full. pino's own buffered
 * destination (sonic-boom, async) measured 4 µs more per line than this, in its async write path; see
 * bench/log-cost.ts.
 */
export class BufferedFd {
  private buf = '';
  private broken = false;
  private readonly pause = new Int32Array(new SharedArrayBuffer(4));

  constructor(
    private readonly fd: number,
    private readonly limit = BUFFER_CHARS,
  ) {}

  /** What pino calls with each serialized line. */
  write(line: string): boolean {
    this.buf += line;
    if (this.buf.length >= this.limit) this.flushSync();
    return true;
  }

  /** pino's `logger.flush(cb)` calls this. */
  flush(cb?: (err?: Error) => void): void {
    this.flushSync();
    cb?.();
  }

  flushSync(): void {
    if (this.buf === '') return;
    const data = Buffer.from(this.buf);
    this.buf = '';
    if (this.broken) return;
    let off = 0;
    while (off < data.length) {
      try {
        off += writeSync(this.fd, data, off);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        // A non-blocking pipe whose reader is behind: wait for it, as a synchronous logger would.
        if (code === 'EAGAIN') Atomics.wait(this.pause, 0, 0, 1);
        // Nobody reads the logs any more: stop writing them rather than fail the gateway.
        else if (code === 'EPIPE') return void (this.broken = true);
        else throw err;
      }
    }
  }
}

/**
 * The line format log pipelines expect: `"level":"info"` (not pino's 30) and an ISO-8601 UTC `time`
 * (not epoch ms), with pino's own formatter and time function.
 */
export function loggerOptions(level = 'info'): LoggerOptions {
  return { level, formatters: { level: (label) => ({ level: label }) }, timestamp: pino.stdTimeFunctions.isoTime };
}

/** Starts at `info` until the config is read: the gateway then applies the one level rule (app/start.ts). */
export function createProcessLogger(level = 'info', fd = 1): Logger {
  const dest = new BufferedFd(fd);
  setInterval(() => dest.flushSync(), FLUSH_MS).unref();
  process.on('exit', () => dest.flushSync());
  return pino(loggerOptions(level), dest);
}

/**
 * The access log's writer: the same JSON line pino would write (level and time as the logger formats
 * them, the logger's bindings, the record's fields, `"msg":"request"`), built with the engine's
 * JSON.stringify straight into the logger's destination. pino's generic serializer spent ~5 µs per line
 * in the gateway's profile (its per-key escaping and safe-stable-stringify for the rule list); this is a
 * fraction of that. The caller checks `isLevelEnabled` first, as before. Any record shape works: the
 * fields are not known here.
 */
export function createAccessLog(log: Logger): (level: string, record: object) => void {
  const internals = log as unknown as Record<symbol, unknown>;
  const stream = internals[pino.symbols.streamSym] as { write(s: string): unknown };
  const bindings = (internals[pino.symbols.chindingsSym] as string | undefined) ?? '';
  const levelFormatter = (
    internals[pino.symbols.formattersSym] as { level?: (label: string, n: number) => object } | undefined
  )?.level;
  const timeOf = internals[pino.symbols.timeSym] as () => string;
  // Each level's `"level":…` written once, as the logger's formatter makes it.
  const levels = new Map<string, string>();
  const levelText = (label: string): string => {
    let text = levels.get(label);
    if (text === undefined) {
      const n = log.levels.values[label] ?? 30;
      text = JSON.stringify(levelFormatter ? levelFormatter(label, n) : { level: n }).slice(1, -1);
      levels.set(label, text);
    }
    return text;
  };
  // ISO time: one toISOString per millisecond, not per line (a busy gateway writes many lines in one).
  const time = timeOf === pino.stdTimeFunctions.isoTime ? isoTimeCached() : timeOf;
  return (level, record) => {
    const fields = JSON.stringify(record);
    stream.write(
      `{${levelText(level)}${time()}${bindings}${fields.length > 2 ? ',' + fields.slice(1, -1) : ''},"msg":"request"}\n`,
    );
  };
}

/** pino's isoTime (`,"time":"…"`), the string kept while the millisecond does not change. */
function isoTimeCached(): () => string {
  let at = -1;
  let text = '';
  return () => {
    const now = Date.now();
    if (now !== at) {
      at = now;
      text = `,"time":"${new Date(now).toISOString()}"`;
    }
    return text;
  };
}

/**
 * Where start-up lines go: the logger itself, or, when its level is above info (warn, error, fatal), a
 * child at info. The line saying where the process listens is the one an operator needs whatever the
 * level (with port 0 it is the only place that says which port was bound); only `silent` drops it.
 */
export function startupLog(log: Logger): Logger {
  return log.isLevelEnabled('info') || log.level === 'silent' ? log : log.child({}, { level: 'info' });
}

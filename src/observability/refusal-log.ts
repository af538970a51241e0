/**
 * @module The log of refusals made before a request reaches the pipeline (the parser's 400/408/431 on
 * `clientError`, PROXY-protocol refusals): one warn line each, sampled per reason so a flood of garbage
 * cannot turn the log into the attack's amplifier. At most `perSecond` lines per reason in a second;
 * the rest are counted, and one line says how many were not logged (`"suppressed": n`) when that
 * second is over.
 */
import type { Logger } from 'pino';

/** Lines per reason per second before the rest are only counted. */
export const REFUSALS_LOGGED_PER_SECOND = 10;
const WINDOW_MS = 1_000;

/** What one refusal line says besides its reason: no client IP (as the access log, unless log.client says so). */
export interface RefusalFields {
  readonly status?: number;
  /** The parser's own code (HPE_INVALID_METHOD, HPE_HEADER_OVERFLOW …). */
  readonly code?: string;
}

interface Window {
  start: number;
  logged: number;
  suppressed: number;
  /** Set while some of this window's refusals went unlogged: says so when the window ends. */
  timer: NodeJS.Timeout | null;
}

export class RefusalLog {
  private readonly windows = new Map<string, Window>();

  constructor(
    private readonly log: Logger,
    private readonly perSecond = REFUSALS_LOGGED_PER_SECOND,
    private readonly now: () => number = Date.now,
  ) {}

  /** A refusal: logged, or counted for the window's "suppressed" line. `msg` is the human reading. */
  refused(reason: string, msg: string, fields: RefusalFields = {}): void {
    const t = this.now();
    let w = this.windows.get(reason);
    if (w === undefined || t - w.start >= WINDOW_MS) {
      if (w !== undefined) this.close(reason, w);
      w = { start: t, logged: 0, suppressed: 0, timer: null };
      this.windows.set(reason, w);
    }
    if (w.logged < this.perSecond) {
      w.logged++;
      this.log.warn({ refused: reason, ...fields }, msg);
      return;
    }
    w.suppressed++;
    if (w.timer === null) {
      const window = w;
      window.timer = setTimeout(() => this.close(reason, window), Math.max(1, WINDOW_MS - (t - w.start))).unref();
    }
  }

  /** Says how many of a window's refusals went unlogged (once), and forgets the window. */
  private close(reason: string, w: Window): void {
    if (w.timer !== null) clearTimeout(w.timer);
    w.timer = null;
    if (this.windows.get(reason) === w) this.windows.delete(reason);
    if (w.suppressed === 0) return;
    const n = w.suppressed;
    w.suppressed = 0;
    this.log.warn({ refused: reason, suppressed: n }, `${n} more refusals (${reason}) in that second were not logged`);
  }

  /** Writes the pending "suppressed" lines now (at shutdown). */
  flush(): void {
    for (const [reason, w] of [...this.windows]) this.close(reason, w);
  }
}

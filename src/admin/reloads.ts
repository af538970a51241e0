/** @module The last config loads and reloads and their result, for the status page: a small bounded history. */

/** What a reload reports (app/reload.ts): in force with what changed, or refused with the config errors. */
export type ReloadOutcome =
  | {
      readonly ok: true;
      readonly rules: number;
      readonly live: readonly string[];
      readonly atRestart: readonly string[];
    }
  | { readonly ok: false; readonly errors: readonly string[] };

export interface ReloadRecord {
  /** ISO time of the load. */
  readonly at: string;
  /** `start` for the load at start-up, `reload` for every later one. */
  readonly kind: 'start' | 'reload';
  readonly ok: boolean;
  /** The rules in force after a successful load. */
  readonly rules?: number;
  /** Changed config keys (names only, never values) in force now, and those that wait for a restart. */
  readonly live?: readonly string[];
  readonly atRestart?: readonly string[];
  /** Why a reload was refused (at most MAX_ERRORS, each cut at MAX_ERROR_CHARS). */
  readonly errors?: readonly string[];
}

export const MAX_RELOADS = 20;
const MAX_ERRORS = 10;
const MAX_ERROR_CHARS = 300;

export class ReloadHistory {
  private readonly records: ReloadRecord[] = [];

  constructor(private readonly now: () => number = Date.now) {}

  /** The load at start-up (always a success: a table that does not load stops the gateway). */
  started(rules: number): void {
    this.push({ at: this.iso(), kind: 'start', ok: true, rules, live: [], atRestart: [] });
  }

  /** A reload's outcome; bound as a method so app/reload.ts can take it as its hook. */
  readonly record = (o: ReloadOutcome): void => {
    if (o.ok)
      this.push({
        at: this.iso(),
        kind: 'reload',
        ok: true,
        rules: o.rules,
        live: [...o.live],
        atRestart: [...o.atRestart],
      });
    else
      this.push({
        at: this.iso(),
        kind: 'reload',
        ok: false,
        errors: o.errors.slice(0, MAX_ERRORS).map((e) => cut(e, MAX_ERROR_CHARS)),
      });
  };

  /** Newest first. */
  list(): readonly ReloadRecord[] {
    return [...this.records].reverse();
  }

  private push(r: ReloadRecord): void {
    this.records.push(r);
    if (this.records.length > MAX_RELOADS) this.records.shift();
  }

  private iso(): string {
    return new Date(this.now()).toISOString();
  }
}

function cut(s: string, n: number): string {
  return s.length <= n ? s : `${s.slice(0, n - 1)}…`;
}

/** @module What the surge module tells of its surges: the status page's rows and the admin API's entries (their shapes only). */

/** One surge as the status page lists it, from this replica's picture. */
export interface SurgeSummary {
  readonly name: string;
  readonly active: boolean;
  /** ISO times, when known. */
  readonly since?: string | null;
  readonly until?: string | null;
  /** The trigger, as a person reads it (e.g. `sign-up above 500 within 1h`). */
  readonly trigger?: string;
}

/** What GET /admin/surges and the status page show of one surge. */
export interface SurgeInfo {
  readonly name: string;
  readonly active: boolean;
  readonly startedAt: string | null;
  readonly endsAt: string | null;
  readonly reason: string | null;
  readonly who: string | null;
  readonly trigger: {
    readonly rule: string;
    readonly above: number;
    readonly within: string;
    readonly statuses: readonly (number | string)[];
    readonly perNetwork: number;
    readonly count: number | null;
  };
  readonly for: string;
  readonly rules: readonly string[];
}

/**
 * @module The status page's cells and sections, as types, and the text cells hold: rates per second with
 * as many digits as a person reads, times as `12m ago` and `in 59m`, values from an admin answer.
 */
import { formatDuration } from '../config/fields/duration.js';

export type Tone = 'good' | 'bad' | 'warn' | 'muted';

/** A write the page's script makes with the admin token (never a link: writes need JavaScript). */
export interface CellAction {
  readonly label: string;
  /** What the page says once it is done, e.g. `Lifted`. */
  readonly past: string;
  readonly method: 'DELETE';
  readonly path: string;
  /** What it acts on, for the page's messages, e.g. `ban login-failures on 203.0.113.7`. */
  readonly what: string;
}

export type Cell =
  string | { readonly text: string; readonly tone?: Tone; readonly num?: boolean; readonly action?: CellAction };

export interface Section {
  readonly id: string;
  readonly title: string;
  readonly note?: string;
  readonly columns: readonly string[];
  readonly rows: readonly (readonly Cell[])[];
  /** Said instead of the table when there are no rows. */
  readonly empty: string;
  /** A two-column table of facts (what, state): it stays a table on a narrow screen. */
  readonly facts?: boolean;
  /** One line shown large above the table (the health summary). */
  readonly line?: { readonly text: string; readonly tone: Tone };
}

/** `1m · 5m` for one decision. */
export function pair(m1: number, m5: number, tone: Tone): Cell {
  return { text: `${perSecond(m1)} · ${perSecond(m5)}`, num: true, ...(m1 > 0 || m5 > 0 ? { tone } : {}) };
}

/** The objects of an array from an admin answer (fields another lane adds are simply not shown). */
export function records(v: unknown): Record<string, unknown>[] {
  return Array.isArray(v) ? v.filter((x): x is Record<string, unknown> => x !== null && typeof x === 'object') : [];
}

export function text(v: unknown): string {
  if (v === null || v === undefined) return '';
  return typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v);
}

/** Requests per second, with as many digits as a person reads. */
export function perSecond(x: number): string {
  if (x === 0) return '0';
  if (x < 0.01) return '<0.01';
  if (x < 10) return x.toFixed(2);
  if (x < 100) return x.toFixed(1);
  return String(Math.round(x));
}

/** `12m ago` for an ISO time before `now` (a no-break space: the two words stay on one line). */
export function ago(iso: unknown, now: number): string {
  const t = typeof iso === 'string' ? Date.parse(iso) : NaN;
  return Number.isNaN(t) ? '' : `${roughly(now - t)}\u00a0ago`;
}

/** `in 59m` for an ISO time after `now`; `never` for none. */
export function until(iso: unknown, now: number): string {
  if (iso === null || iso === undefined) return 'never';
  const t = typeof iso === 'string' ? Date.parse(iso) : NaN;
  return Number.isNaN(t) ? '' : `in\u00a0${roughly(t - now)}`;
}

/** A duration to the second under an hour, to the minute under a day, to the hour beyond. */
function roughly(ms: number): string {
  const unit = ms < 3_600_000 ? 1_000 : ms < 86_400_000 ? 60_000 : 3_600_000;
  return formatDuration(Math.max(0, Math.round(ms / unit) * unit)).replace(/^0ms$/, '0s');
}

/**
 * @module Applying the shared guard state's change log to a replica's view (redis-state.ts).
 */
import { isLive } from './entry.js';
import type { LogRecord } from './redis-scripts.js';
import { parseEntry } from './redis-resync.js';
import type { GuardView } from './view.js';

/** The version applied last (-1: the set was never read) and its record's tag (null: not known). */
export interface LogPosition {
  last: number;
  tag: string | null;
}

/** A log record's fields. */
function readRecord(fields: readonly string[]): { op: string; field: string; json: string; tag: string } {
  const r = { op: '', field: '', json: '', tag: '' };
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const v = fields[i + 1]!;
    if (fields[i] === 'o') r.op = v;
    else if (fields[i] === 'f') r.field = v;
    else if (fields[i] === 'j') r.json = v;
    else if (fields[i] === 't') r.tag = v;
  }
  return r;
}

/**
 * Applies records in order to `view` (`t`: now), recording each version in `at` once applied; false at a
 * gap (records trimmed, or a change written without one by an earlier release) or a reset record: the
 * set is read again.
 */
export function applyRecords(view: GuardView, records: readonly LogRecord[], at: LogPosition, t: number): boolean {
  for (const [id, fields] of records) {
    const n = parseInt(id, 10);
    if (n !== at.last + 1) return false;
    const rec = readRecord(fields);
    if (rec.op === 'r') return false;
    if (rec.op === 'p') {
      const e = parseEntry(rec.field, rec.json);
      if (e !== null && isLive(e, t)) view.put(e);
      else view.remove(rec.field);
    } else if (rec.op === 'd') view.remove(rec.field);
    at.last = n;
    at.tag = rec.tag;
  }
  return true;
}

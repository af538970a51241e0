/**
 * @module The status page's sections for the guard, from the admin API's own answers: bans (each with
 * its Lift), blocks and exemptions (a runtime one with its Remove), the top limited keys.
 */
import { ago, records, text, until, type Cell, type CellAction, type Section } from './status-cells.js';

type Listing = { error?: unknown; scope?: unknown; bans?: unknown; entries?: unknown };

function scopeNote(l: Listing): string {
  return l.scope === 'memory' ? 'This process only (memory store).' : 'Shared by every replica through the store.';
}

export function bansSection(body: unknown, now: number): Section {
  const base = { id: 'bans', title: 'Bans', columns: ['ban', 'key', 'reason', 'since', 'ends', ''] } as const;
  const l = (body ?? {}) as Listing;
  if (body === null || l.error !== undefined) return { ...base, rows: [], empty: unavailable(body) };
  const rows = records(l.bans).map((b) => {
    const ban = text(b.ban);
    const key = text(b.key);
    const path = `/admin/bans/${encodeURIComponent(ban)}/${encodeURIComponent(key)}`;
    const action: CellAction = { label: 'Lift', past: 'Lifted', method: 'DELETE', path, what: `ban ${ban} on ${key}` };
    return [ban, key, text(b.reason), ago(b.createdAt, now), until(b.expiresAt, now), { text: '', action }];
  });
  return { ...base, note: scopeNote(l), rows, empty: 'No active ban.' };
}

export function entriesSection(id: string, title: string, base: string, body: unknown, now: number): Section {
  const head = { id, title, columns: ['ip or cidr', 'source', 'reason', 'ends', ''] } as const;
  const l = (body ?? {}) as Listing;
  if (body === null || l.error !== undefined) return { ...head, rows: [], empty: unavailable(body) };
  // The blocks listing also names bans (source `ban`): those have their own section.
  const rows = records(l.entries)
    .filter((e) => e.source === 'config' || e.source === 'runtime')
    .map((e): Cell[] => {
      const target = text(e.ip ?? e.cidr);
      const what = `${id === 'blocks' ? 'block' : 'exemption'} of ${target}`;
      const act: Cell =
        e.source === 'runtime'
          ? {
              text: '',
              action: {
                label: 'Remove',
                past: 'Removed',
                method: 'DELETE',
                path: `${base}/${encodeURIComponent(target)}`,
                what,
              },
            }
          : { text: 'edit limits.yaml', tone: 'muted' };
      return [target, text(e.source), text(e.reason), until(e.expiresAt, now), act];
    });
  return { ...head, note: scopeNote(l), rows, empty: `No ${title.toLowerCase()}.` };
}

export function limitedSection(answers: readonly unknown[]): Section {
  const rows: Cell[][] = [];
  let window = '';
  for (const a of answers) {
    const { rule, top, window: w } = (a ?? {}) as { rule?: unknown; top?: unknown; window?: unknown };
    if (typeof w === 'string') window = w;
    for (const k of records(top))
      rows.push([
        text(rule),
        text(k.key),
        { text: k.error ? `${text(k.count)} (±${text(k.error)})` : text(k.count), num: true },
      ]);
  }
  return {
    id: 'limited',
    title: 'Top limited keys',
    note: `The keys limited most${window === '' ? ' recently' : `: ${window}`} (as GET /admin/limited answers).`,
    columns: ['rule', 'key', 'times limited'],
    rows,
    empty: 'No key was limited recently.',
  };
}

function unavailable(body: unknown): string {
  if (body === null) return 'Not served by this process.';
  return `Not available: ${text((body as Listing).error)}`;
}

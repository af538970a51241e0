/** @module Human-readable views of a snapshot for `rategate check` and startup logs. */
import { formatDuration } from './fields/duration.js';
import type { CompiledRule, Snapshot } from './types.js';
import { redactStoreUrl as redactUrl } from './store-url.js';

/** Hides a password in a store URL: the summary is printed and logged. */
export { redactUrl };

const COLUMNS = ['NAME', 'MATCH', 'PER', 'LIMIT', 'PERIOD', 'ALGORITHM', 'COST', 'SHADOW'] as const;
/** Numbers read best right-aligned. */
const RIGHT = new Set<string>(['LIMIT', 'COST']);

/** One line: how many rules, and which store and upstream the snapshot points at. */
export function formatSummary(snapshot: Snapshot): string {
  const n = snapshot.rules.length;
  const shadow = snapshot.rules.filter((r) => r.shadow).length;
  const { store, upstream, upstreams, routes } = snapshot.config;
  // Routes in order (the first match wins), each with where it goes.
  const routed = routes.map(
    (r) =>
      `${r.match.join(' | ')} → ${r.upstream === 'default' ? upstream.url : `${r.upstream} (${upstreams[r.upstream]?.url ?? '?'})`}`,
  );
  return (
    `${snapshot.source}: ${n} rule${n === 1 ? '' : 's'}` +
    (shadow > 0 ? ` (${shadow} shadow)` : '') +
    (snapshot.config.bans.length > 0 ? `, ${count(snapshot.config.bans.length, 'ban')}` : '') +
    (snapshot.config.concurrency.length > 0 ? `, ${count(snapshot.config.concurrency.length, 'in-flight rule')}` : '') +
    `, store ${redactUrl(store.url)}, upstream ${upstream.url}` +
    (routed.length > 0 ? `; routes: ${routed.join(', ')}` : '')
  );
}

function count(n: number, what: string): string {
  return `${n} ${what}${n === 1 ? '' : 's'}`;
}

/** `per:` as written (`ip`, `header:x-app-id`, `param:user[email]`), plus a mark for `missing: ip`, a surge, `when` and overrides. */
export function perLabel(r: CompiledRule): string {
  let label = r.key.label;
  if (r.key.missingIp) label += ' (missing: ip)';
  if (r.surge !== null) label += ` (surge ${r.surge})`;
  if (r.whenAuthenticated !== undefined) label += r.whenAuthenticated ? ' (authenticated)' : ' (unauthenticated)';
  if (r.whenQuery !== null) label += ` (query: ${r.whenQuery.join('|')})`;
  if (r.whenAccount !== null) label += ` (account: ${accountLabel(r.whenAccount)})`;
  if (r.overrides.length > 0) label += ` (+${r.overrides.length} override${r.overrides.length === 1 ? '' : 's'})`;
  return label;
}

function accountLabel(c: NonNullable<CompiledRule['whenAccount']>): string {
  const parts = [];
  if (c.age !== undefined) parts.push(`age ${c.age.text}`);
  if (c.bot !== undefined) parts.push(c.bot ? 'bot' : 'not bot');
  if (c.locked !== undefined) parts.push(c.locked ? 'locked' : 'not locked');
  return parts.join(', ');
}

/** The compiled rules as an aligned table (the summary is `formatSummary`, printed after it). */
export function formatRulesTable(snapshot: Snapshot): string {
  if (snapshot.rules.length === 0) return '(no rules: every request passes uncounted)';
  const rows: string[][] = snapshot.rules.map((r) => [
    r.name,
    r.patterns.join(', '),
    perLabel(r),
    String(r.limit),
    formatDuration(r.periodMs),
    r.algorithm,
    String(r.cost),
    r.shadow ? 'yes' : 'no',
  ]);
  const widths = COLUMNS.map((c, i) => Math.max(c.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, i) => {
        const w = widths[i] ?? 0;
        return RIGHT.has(COLUMNS[i] ?? '') ? cell.padStart(w) : cell.padEnd(w);
      })
      .join('  ')
      .trimEnd();
  return [line(COLUMNS), ...rows.map(line)].join('\n');
}

/**
 * @module Number formats of the bench's console lines and tables.
 */

export const fmtInt = (n: number | undefined): string =>
  n === undefined || !Number.isFinite(n) ? '—' : Math.round(n).toLocaleString('en');
export const fmtMs = (n: number | undefined): string =>
  n === undefined || !Number.isFinite(n) ? '—' : n < 10 ? n.toFixed(2) : n.toFixed(1);
export const mb = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(0)} MB`;
export const fmtUs = (n: number | null | undefined): string =>
  n === undefined || n === null || !Number.isFinite(n) ? '—' : n.toFixed(1);

export function statusSummary(s: Record<string, number>): string {
  const total = Object.values(s).reduce((a, b) => a + b, 0) || 1;
  const by = (f: (c: number) => boolean): number =>
    Object.entries(s).reduce((a, [c, n]) => (f(Number(c)) ? a + n : a), 0);
  const pct = (n: number): string => `${((100 * n) / total).toFixed(0)}%`;
  return `2xx ${pct(by((c) => c < 300))}, 429 ${pct(by((c) => c === 429))}, other 4xx ${pct(by((c) => c >= 400 && c < 500 && c !== 429))}, 5xx ${pct(by((c) => c >= 500))}`;
}

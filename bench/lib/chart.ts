/** @module A hand-written SVG bar chart of the bench results (no dependencies). */

export interface ChartGroup {
  /** The system, under its bars. */
  label: string;
  /** One value per series (null: not measured). */
  values: Array<number | null>;
}

export interface Panel {
  title: string;
  unit: string;
  series: string[];
  groups: ChartGroup[];
  /** Series colours (default: a fixed palette). */
  colors?: string[];
}

const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c'];

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function niceMax(v: number): number {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function fmt(v: number): string {
  if (v === 0) return '0';
  if (v >= 1000) return `${(v / 1000).toFixed(v % 1000 === 0 ? 0 : 1)}k`;
  if (v >= 100) return v.toFixed(0);
  if (v >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

function panel(p: Panel, x0: number, y0: number, width: number, height: number): string {
  const parts: string[] = [];
  const colors = p.colors ?? COLORS;
  const left = 56;
  const top = 56;
  const bottom = 54;
  const plotW = width - left - 16;
  const plotH = height - top - bottom;
  const max = niceMax(Math.max(0, ...p.groups.flatMap((g) => g.values.map((v) => v ?? 0))));
  parts.push(`<g transform="translate(${x0},${y0})">`);
  parts.push(`<text x="${left}" y="18" font-size="15" font-weight="600">${esc(p.title)}</text>`);
  // Legend.
  let lx = left;
  p.series.forEach((s, i) => {
    parts.push(`<rect x="${lx}" y="27" width="10" height="10" fill="${colors[i % colors.length]}"/>`);
    parts.push(`<text x="${lx + 14}" y="36" font-size="11">${esc(s)}</text>`);
    lx += 22 + s.length * 6.5;
  });
  // Axis and grid.
  for (let i = 0; i <= 4; i++) {
    const v = (max * i) / 4;
    const y = top + plotH - (plotH * i) / 4;
    parts.push(`<line x1="${left}" x2="${left + plotW}" y1="${y}" y2="${y}" stroke="#e5e7eb"/>`);
    parts.push(`<text x="${left - 6}" y="${y + 4}" font-size="10" text-anchor="end" fill="#555">${fmt(v)}</text>`);
  }
  parts.push(
    `<text x="12" y="${top + plotH / 2}" font-size="11" fill="#555" transform="rotate(-90 12 ${top + plotH / 2})" text-anchor="middle">${esc(p.unit)}</text>`,
  );
  const groupW = plotW / Math.max(1, p.groups.length);
  const barW = Math.min(28, (groupW - 12) / Math.max(1, p.series.length));
  p.groups.forEach((g, gi) => {
    const gx = left + gi * groupW + (groupW - barW * p.series.length) / 2;
    g.values.forEach((v, si) => {
      if (v === null || !Number.isFinite(v)) return;
      const h = (plotH * v) / max;
      const x = gx + si * barW;
      const y = top + plotH - h;
      parts.push(
        `<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${(barW - 2).toFixed(1)}" height="${h.toFixed(1)}" fill="${colors[si % colors.length]}"><title>${esc(`${g.label} · ${p.series[si]}: ${fmt(v)} ${p.unit}`)}</title></rect>`,
      );
      parts.push(
        `<text x="${(x + (barW - 2) / 2).toFixed(1)}" y="${(y - 3).toFixed(1)}" font-size="9" text-anchor="middle" fill="#333">${fmt(v)}</text>`,
      );
    });
    // Wrap the label at ~20 characters a line; a parenthesized tail goes on a line of its own.
    const words: string[] = [];
    const paren = g.label.indexOf(' (');
    const segs = paren > 0 ? [g.label.slice(0, paren), g.label.slice(paren + 1)] : g.label.split(' ');
    for (const w of segs) {
      const last = words[words.length - 1];
      if (last !== undefined && last.length + 1 + w.length <= 20) words[words.length - 1] = `${last} ${w}`;
      else words.push(w);
    }
    words.forEach((w, wi) => {
      parts.push(
        `<text x="${(left + gi * groupW + groupW / 2).toFixed(1)}" y="${top + plotH + 16 + wi * 13}" font-size="11" text-anchor="middle">${esc(w)}</text>`,
      );
    });
  });
  parts.push(`<line x1="${left}" x2="${left + plotW}" y1="${top + plotH}" y2="${top + plotH}" stroke="#333"/>`);
  parts.push('</g>');
  return parts.join('\n');
}

/** Panels stacked vertically, with a caption (the machine) at the bottom. */
export function renderChart(panels: Panel[], caption: string, width = 900, panelHeight = 300): string {
  const height = panels.length * panelHeight + 30;
  const body = panels.map((p, i) => panel(p, 0, i * panelHeight, width, panelHeight)).join('\n');
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, Segoe UI, sans-serif">`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    body,
    `<text x="${width / 2}" y="${height - 10}" font-size="11" text-anchor="middle" fill="#555">${esc(caption)}</text>`,
    '</svg>',
    '',
  ].join('\n');
}

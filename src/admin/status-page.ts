/**
 * @module The status page's HTML: the same tables the script draws (status-view.ts), rendered on the
 * server so that reading works without JavaScript; every value HTML-escaped (rule names, keys and
 * reasons are operator or client input).
 */
import type { Cell, Section } from './status-view.js';
import { SCRIPT, STYLE } from './status-assets.js';

/** How often a browser without JavaScript reloads the page. */
const NOSCRIPT_REFRESH_S = 15;

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text made safe for HTML text and for a double-quoted attribute value. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

export interface PageContent {
  /** The meta line under the title (version, replica, time). */
  readonly meta: string;
  readonly tokenRequired: boolean;
  /** The tables; or, for a page that shows no data, one notice (signed out, refused). */
  readonly sections: readonly Section[];
  /** Refresh without JavaScript (pages with data only). */
  readonly refresh: boolean;
}

export function statusPage(p: PageContent): string {
  const refresh = p.refresh ? `<noscript><meta http-equiv="refresh" content="${NOSCRIPT_REFRESH_S}"></noscript>` : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>rategate status</title>
<style>${STYLE}</style>
${refresh}
</head>
<body data-token-required="${p.tokenRequired ? 'true' : 'false'}">
<header>
<h1>rategate status</h1>
<span id="meta">${escapeHtml(p.meta)}</span>
<form id="token-form" class="js-only" hidden autocomplete="off">
<label for="token">Admin token</label>
<input id="token" type="password" autocomplete="off" spellcheck="false" size="24">
<button type="submit">Use token</button>
<span class="note">kept in this tab only</span>
</form>
<p id="message" role="status" aria-live="polite"></p>
</header>
<main id="sections">
${p.sections.map(renderSection).join('\n')}
</main>
<script>${SCRIPT}</script>
</body>
</html>
`;
}

export function renderSection(s: Section): string {
  const line = s.line === undefined ? '' : `<p class="line ${s.line.tone}">${escapeHtml(s.line.text)}</p>`;
  const note = line + (s.note === undefined ? '' : `<p class="note">${escapeHtml(s.note)}</p>`);
  if (s.rows.length === 0 && s.line !== undefined)
    return `<section id="s-${escapeHtml(s.id)}"><h2>${escapeHtml(s.title)}</h2>${note}</section>`;
  if (s.rows.length === 0)
    return `<section id="s-${escapeHtml(s.id)}"><h2>${escapeHtml(s.title)}</h2>${note}<p class="empty">${escapeHtml(s.empty)}</p></section>`;
  const head = s.columns.map((c) => `<th scope="col">${escapeHtml(c)}</th>`).join('');
  const rows = s.rows
    .map((row) => `<tr>${row.map((c, i) => renderCell(c, s.columns[i] ?? '')).join('')}</tr>`)
    .join('\n');
  return `<section id="s-${escapeHtml(s.id)}"><h2>${escapeHtml(s.title)}</h2>${note}<table${s.facts === true ? ' class="facts"' : ''}><thead><tr>${head}</tr></thead><tbody>
${rows}
</tbody></table></section>`;
}

function renderCell(c: Cell, label: string): string {
  const v = typeof c === 'string' ? { text: c } : c;
  const cls = [v.tone, v.num === true ? 'num' : ''].filter(Boolean).join(' ');
  const a = v.action;
  const button =
    a === undefined
      ? ''
      : `<button type="button" class="act" data-method="${a.method}" data-path="${escapeHtml(a.path)}" data-what="${escapeHtml(a.what)}" data-past="${escapeHtml(a.past)}">${escapeHtml(a.label)}</button>`;
  return `<td data-label="${escapeHtml(label)}"${cls === '' ? '' : ` class="${cls}"`}>${escapeHtml(v.text)}${button}</td>`;
}

/** A section with one message and no table (signed out, refused). */
export function notice(id: string, title: string, text: string): Section {
  return { id, title, columns: [], rows: [], empty: text };
}

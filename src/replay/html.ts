/**
 * @module Replay's report as one self-contained HTML page (`--html`): inline style, inline SVG charts
 * (per rule, requests counted and would-be-limited per hour), the tables; no script, nothing fetched,
 * so it opens from a mail attachment or an air-gapped laptop alike.
 */
import { UNCOUNTED_LABEL, type BanReport, type InFlightReport, type ReplayReport, type RuleReport } from './report.js';

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const n = (v: number) => v.toLocaleString('en-US');

const STYLE = `body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:1rem 1.5rem;color:#1d2430;background:#fafbfc}
h1{font-size:1.4rem;margin:.2rem 0}h2{font-size:1.1rem;margin:0 0 .3rem}.meta{color:#5b6575}
section.rule{background:#fff;border:1px solid #dde2ea;border-radius:8px;padding:1rem;margin:1rem 0}
table{border-collapse:collapse;margin:.5rem 0}td,th{padding:.2rem .7rem;border-bottom:1px solid #e6e9ef;text-align:left}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}.tag{font-size:.75rem;padding:.05rem .4rem;border-radius:4px;background:#eef;margin-left:.4rem}
.shadow{background:#fff3cd}.assumed{background:#e8f4ea}.nd{background:#f1f3f5;color:#5b6575}.lim{color:#c0392b;font-weight:600}
svg{width:100%;height:auto}.legend span{margin-right:1rem}.sw{display:inline-block;width:.8rem;height:.8rem;border-radius:2px;vertical-align:-1px;margin-right:.3rem}`;

/** The whole page. */
export function reportPage(r: ReplayReport): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>rategate replay: ${esc(r.sources.join(', '))}</title><style>${STYLE}</style></head>
<body><h1>rategate replay</h1>
<p class="meta">${esc(r.sources.join(', '))} (${esc(r.format)}) against ${esc(r.config)}: ${n(r.requests)} requests from ${esc(r.from ?? '-')} to ${esc(r.to ?? '-')}</p>
${assumptions(r)}
${summary(r)}
${r.rules.map(ruleSection).join('\n')}
${r.bans.map(banSection).join('\n')}
${r.inFlight.map(inFlightSection).join('\n')}
</body></html>
`;
}

function summary(r: ReplayReport): string {
  const rows = [
    ['lines read', r.lines],
    ['would have been limited (429)', r.limited],
    ...Object.entries(r.uncounted).map(
      ([k, v]) => [UNCOUNTED_LABEL[k] ?? `${k} (no rule counted)`, v] as [string, number],
    ),
    ...(r.credentialShown > 0
      ? [['showed a credential in the log all the same', r.credentialShown] as [string, number]]
      : []),
    ['skipped: no client address', r.noClientAddress],
    ['bad lines', r.badLines.count],
  ] as [string, number][];
  const bad = r.badLines.first.map((b) => `<li><code>${esc(b.source)}:${b.line}</code>: ${esc(b.why)}</li>`).join('');
  const rules = r.rules
    .map(
      (x) =>
        `<tr><td><a href="#rule-${esc(x.name)}">${esc(x.name)}</a>${badge(x)}</td><td>${esc(x.limit)}</td>` +
        (x.notDecidable === undefined
          ? `<td class="num">${n(x.counted)}</td><td class="num lim">${n(x.limited)}</td><td class="num">${n(x.distinctKeysLimited)}</td>`
          : `<td colspan="3" class="nd">not decidable from this log</td>`) +
        '</tr>',
    )
    .join('');
  return `<table>${rows.map(([k, v]) => `<tr><th>${esc(k)}</th><td class="num">${n(v)}</td></tr>`).join('')}</table>
${bad === '' ? '' : `<p>First bad lines:</p><ul>${bad}</ul>`}
<table><tr><th>rule</th><th>limit</th><th class="num">counted</th><th class="num">would be limited</th><th class="num">keys limited</th></tr>${rules}</table>
${banSummary(r)}`;
}

/** One row per ban, beside the rules' table (none when the table has no bans). */
function banSummary(r: ReplayReport): string {
  if (r.bans.length === 0) return '';
  const rows = r.bans
    .map(
      (b) =>
        `<tr><td><a href="#ban-${esc(b.name)}">${esc(b.name)}</a></td><td>${esc(b.ban)}</td>` +
        (b.notDecidable === undefined
          ? `<td class="num">${n(b.counted)}</td><td class="num lim">${n(b.started)}</td><td class="num lim">${n(b.refused)}</td>`
          : `<td colspan="3" class="nd">not decidable from this log</td>`) +
        '</tr>',
    )
    .join('');
  return `<table><tr><th>ban</th><th>rule</th><th class="num">answers counted</th><th class="num">bans started</th><th class="num">refused while banned</th></tr>${rows}</table>`;
}

function badge(rule: RuleReport): string {
  if (rule.notDecidable !== undefined) return '<span class="tag nd">not decidable</span>';
  const assumed =
    rule.assumed === undefined ? '' : `<span class="tag assumed">assuming ${esc(rule.assumed.join(', '))}</span>`;
  return assumed + (rule.shadow ? '<span class="tag shadow">shadow</span>' : '');
}

/** What replay was told to assume, above everything it decided under it (none: nothing). */
function assumptions(r: ReplayReport): string {
  if (r.assumptions.length === 0) return '';
  return `<p class="assumed">Assumed where the log is silent: ${r.assumptions.map((a) => `<b>${esc(a.name)}</b> (${esc(a.meaning)})`).join('; ')}.</p>`;
}

function ruleSection(rule: RuleReport): string {
  const head = `<section class="rule" id="rule-${esc(rule.name)}"><h2>${esc(rule.name)}${badge(rule)}</h2><p class="meta">${esc(rule.limit)}</p>`;
  if (rule.notDecidable !== undefined)
    return `${head}<p class="nd">Not decidable from this log: ${esc(rule.notDecidable)}.</p></section>`;
  const keys = rule.topKeys
    .map((k) => `<tr><td><code>${esc(k.key)}</code></td><td class="num lim">${n(k.limited)}</td></tr>`)
    .join('');
  return `${head}<p>Counted ${n(rule.counted)}, would have limited <span class="lim">${n(rule.limited)}</span>${rule.shadow ? ' (shadow: never rejects)' : ''}, distinct keys limited ${n(rule.distinctKeysLimited)}.</p>
${chart(rule)}
${keys === '' ? '' : `<table><tr><th>top keys limited</th><th class="num">requests</th></tr>${keys}</table>`}</section>`;
}

function banSection(ban: BanReport): string {
  const head = `<section class="rule ban" id="ban-${esc(ban.name)}"><h2>${esc(ban.name)}<span class="tag">ban</span></h2><p class="meta">${esc(ban.ban)}</p>`;
  if (ban.notDecidable !== undefined)
    return `${head}<p class="nd">Not decidable from this log: ${esc(ban.notDecidable)}.</p></section>`;
  const keys = ban.topKeys
    .map((k) => `<tr><td><code>${esc(k.key)}</code></td><td class="num lim">${n(k.bans)}</td></tr>`)
    .join('');
  const hours = ban.hours
    .filter((h) => h.started > 0)
    .map((h) => `<tr><td>${esc(h.hour.slice(0, 13))}h</td><td class="num lim">${n(h.started)}</td></tr>`)
    .join('');
  return `${head}<p>Answers counted ${n(ban.counted)}, bans started <span class="lim">${n(ban.started)}</span>, distinct keys banned ${n(ban.distinctKeysBanned)}, requests refused while banned <span class="lim">${n(ban.refused)}</span>.</p>
${hours === '' ? '' : `<table><tr><th>hour</th><th class="num">bans started</th></tr>${hours}</table>`}
${keys === '' ? '' : `<table><tr><th>top keys banned</th><th class="num">bans</th></tr>${keys}</table>`}</section>`;
}

function inFlightSection(c: InFlightReport): string {
  return `<section class="rule" id="inflight-${esc(c.name)}"><h2>${esc(c.name)}<span class="tag nd">in-flight</span></h2><p class="meta">${esc(c.limit)}</p><p class="nd">Not decidable from this log: ${esc(c.notDecidable)}.</p></section>`;
}

const W = 960;
const H = 200;
const PAD = { l: 56, r: 12, t: 10, b: 28 };

/** Counted (blue area) and would-be-limited (red bars) per hour, on one scale. */
function chart(rule: RuleReport): string {
  const hours = rule.hours;
  if (hours.length === 0) return '';
  const max = Math.max(1, ...hours.map((h) => h.counted));
  const iw = W - PAD.l - PAD.r;
  const ih = H - PAD.t - PAD.b;
  const step = iw / hours.length;
  const y = (v: number) => PAD.t + ih - (v / max) * ih;
  const x = (i: number) => PAD.l + i * step;
  const area = hours.map((h, i) => `${(x(i) + step / 2).toFixed(1)},${y(h.counted).toFixed(1)}`).join(' ');
  const bars = hours
    .map((h, i) =>
      h.limited > 0
        ? `<rect x="${(x(i) + step * 0.2).toFixed(1)}" y="${y(h.limited).toFixed(1)}" width="${(step * 0.6).toFixed(1)}" height="${(PAD.t + ih - y(h.limited)).toFixed(1)}" fill="#c0392b"><title>${esc(h.hour.slice(0, 13))}h: ${n(h.limited)} limited</title></rect>`
        : '',
    )
    .join('');
  const every = Math.max(1, Math.ceil(hours.length / 12));
  const ticks = hours
    .map((h, i) =>
      i % every === 0
        ? `<text x="${(x(i) + step / 2).toFixed(1)}" y="${H - 8}" text-anchor="middle">${esc(h.hour.slice(11, 13))}h</text>`
        : '',
    )
    .join('');
  const base = PAD.t + ih;
  return `<svg viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(rule.name)}: counted and would-be-limited requests per hour" font-size="11" fill="#5b6575">
<line x1="${PAD.l}" y1="${base}" x2="${W - PAD.r}" y2="${base}" stroke="#ccd"/><text x="${PAD.l - 6}" y="${PAD.t + 8}" text-anchor="end">${n(max)}</text><text x="${PAD.l - 6}" y="${base}" text-anchor="end">0</text>
<polygon points="${(x(0) + step / 2).toFixed(1)},${base} ${area} ${(x(hours.length - 1) + step / 2).toFixed(1)},${base}" fill="#3b7dd8" fill-opacity=".25" stroke="#3b7dd8"/>
${bars}${ticks}</svg>
<p class="legend"><span><i class="sw" style="background:#3b7dd8"></i>counted per hour</span><span><i class="sw" style="background:#c0392b"></i>would have been limited</span></p>`;
}

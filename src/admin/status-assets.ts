/**
 * @module The status page's inline style and script, and the Content-Security-Policy that allows exactly
 * them (by their SHA-256 hashes) and nothing else: no other script, no inline event handler, no style
 * attribute, no third party, no framing; fetches go to this listener only.
 */
import { createHash } from 'node:crypto';

export const STYLE = `
:root{color-scheme:light dark;--bg:#fff;--fg:#1f2328;--muted:#656d76;--line:#d0d7de;--head:#f6f8fa;--good:#1a7f37;--bad:#cf222e;--warn:#9a6700}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#8d96a0;--line:#30363d;--head:#161b22;--good:#3fb950;--bad:#f85149;--warn:#d29922}}
*{box-sizing:border-box}
[hidden]{display:none!important}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:var(--bg);color:var(--fg)}
header{padding:10px 16px;border-bottom:1px solid var(--line);display:flex;flex-wrap:wrap;gap:6px 16px;align-items:center}
h1{font-size:18px;margin:0}
h2{font-size:15px;margin:0 0 4px}
#meta{color:var(--muted);font-size:12px}
main{padding:12px 16px 24px;display:grid;gap:18px;grid-template-columns:repeat(auto-fit,minmax(min(100%,460px),1fr))}
section{min-width:0;overflow-x:auto}
#s-health,#s-rules,#s-fleet,#s-surges{grid-column:1/-1}
#s-health h2{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}
.line{margin:0;font-size:16px;font-weight:600}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:3px 8px;border-bottom:1px solid var(--line);vertical-align:top;overflow-wrap:break-word}
th{background:var(--head);font-weight:600;font-size:12px;color:var(--muted)}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
#s-rules th:nth-child(n+3),#s-fleet th:nth-child(n+2):nth-child(-n+4),#s-limited th:nth-child(3){text-align:right}
table.facts thead{display:none}
table.facts td:first-child{color:var(--muted);width:30%}
.good{color:var(--good)}.bad{color:var(--bad)}.warn{color:var(--warn)}.muted{color:var(--muted)}
.note,.empty{margin:0 0 6px;font-size:12px;color:var(--muted)}
.act,.js-only{display:none}
.js .act{display:inline-block}.js .js-only{display:flex}
form{gap:6px;align-items:center;flex-wrap:wrap}
input{font:inherit;padding:2px 6px;border:1px solid var(--line);border-radius:4px;background:var(--bg);color:var(--fg)}
button{font:inherit;white-space:nowrap;padding:1px 10px;border:1px solid var(--line);border-radius:4px;background:var(--head);color:var(--fg);cursor:pointer}
button.act{color:var(--bad)}
#message{margin:0;flex-basis:100%;font-weight:600}
#message:empty{display:none}
@media (max-width:640px){
header,main{padding-left:10px;padding-right:10px}
table:not(.facts) thead{display:none}
table:not(.facts),table:not(.facts) tbody,table:not(.facts) tr,table:not(.facts) td{display:block;width:100%}
table:not(.facts) tr{border-bottom:1px solid var(--line);padding:4px 0}
table:not(.facts) td{border:0;padding:1px 0;display:flex;gap:8px;overflow-wrap:anywhere}
table:not(.facts) td.num{text-align:left}
table:not(.facts) td::before{content:attr(data-label);flex:0 0 42%;color:var(--muted);font-size:12px}
}
`;

/**
 * Refreshes the tables from /status.json every few seconds (the server's own layout: `view`), asks for
 * the admin token when the gateway wants one (kept in this tab's sessionStorage, sent as a bearer
 * header), and makes the lift and remove writes. It builds nodes with textContent, never markup.
 */
export const SCRIPT = `
(() => {
  'use strict';
  const KEY = 'rategate.adminToken', EVERY_MS = 3000;
  const $ = (id) => document.getElementById(id);
  const main = $('sections'), form = $('token-form'), input = $('token'), message = $('message'), meta = $('meta');
  let token = null, timer = 0, failing = false;
  let tokenRequired = document.body.dataset.tokenRequired === 'true';
  try { token = sessionStorage.getItem(KEY); } catch (e) { token = null; }
  document.documentElement.classList.add('js');

  const say = (text, tone) => { message.textContent = text; message.className = tone || ''; };
  const auth = () => (token ? { Authorization: 'Bearer ' + token } : {});
  const remember = (t) => { token = t; try { if (t) sessionStorage.setItem(KEY, t); else sessionStorage.removeItem(KEY); } catch (e) { /* private mode */ } };
  const ask = (text) => { form.hidden = false; say(text, 'bad'); input.focus(); };
  const later = () => { clearTimeout(timer); timer = setTimeout(load, EVERY_MS); };

  function h(tag, attrs, text) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== '') el.setAttribute(k, v);
    if (text !== undefined) el.textContent = text;
    return el;
  }
  function cell(c, label) {
    const v = typeof c === 'string' ? { text: c } : c;
    const td = h('td', { 'data-label': label, class: [v.tone, v.num ? 'num' : ''].filter(Boolean).join(' ') }, v.text);
    if (v.action) td.append(h('button', { type: 'button', class: 'act', 'data-method': v.action.method, 'data-path': v.action.path, 'data-what': v.action.what, 'data-past': v.action.past }, v.action.label));
    return td;
  }
  function section(s) {
    const el = h('section', { id: 's-' + s.id });
    el.append(h('h2', {}, s.title));
    if (s.line) el.append(h('p', { class: 'line ' + s.line.tone }, s.line.text));
    if (s.note) el.append(h('p', { class: 'note' }, s.note));
    if (s.rows.length === 0) { if (!s.line) el.append(h('p', { class: 'empty' }, s.empty)); return el; }
    const head = h('tr');
    for (const c of s.columns) head.append(h('th', { scope: 'col' }, c));
    const body = h('tbody');
    for (const row of s.rows) { const tr = h('tr'); row.forEach((c, i) => tr.append(cell(c, s.columns[i]))); body.append(tr); }
    const table = h('table', { class: s.facts ? 'facts' : '' });
    table.append(h('thead'), body);
    table.firstChild.append(head);
    el.append(table);
    return el;
  }
  function render(d) {
    meta.textContent = 'rategate ' + d.version + ' · ' + d.replica.host + ' (pid ' + d.replica.pid + ') · ' + new Date(d.generatedAt).toLocaleTimeString();
    main.replaceChildren(...d.view.map(section));
  }

  async function load() {
    if (document.hidden) return later();
    let r;
    try { r = await fetch('status.json', { headers: auth(), cache: 'no-store' }); }
    catch (e) { failing = true; say('The gateway does not answer: ' + e.message, 'bad'); return later(); }
    if (r.status === 401) {
      const had = token !== null;
      remember(null); tokenRequired = true; clearTimeout(timer);
      return ask(had ? 'The admin token was refused (401): enter the right one.' : 'This gateway asks for its admin token.');
    }
    const d = await r.json().catch(() => ({}));
    if (!r.ok) { failing = true; say('The status was refused (' + r.status + '): ' + (d.error || r.statusText), 'bad'); return later(); }
    if (failing) { failing = false; say(''); }
    tokenRequired = d.auth.tokenRequired;
    render(d);
    later();
  }

  async function act(b) {
    if (tokenRequired && !token) return ask('Lift and remove need the admin token.');
    b.disabled = true;
    let r;
    try { r = await fetch(b.dataset.path, { method: b.dataset.method, headers: auth() }); }
    catch (e) { b.disabled = false; return say('The gateway does not answer: ' + e.message, 'bad'); }
    const d = await r.json().catch(() => ({}));
    b.disabled = false;
    if (r.status === 401) {
      remember(null); clearTimeout(timer);
      return ask('The admin token was refused (401): nothing was changed. Enter the right one.');
    }
    if (!r.ok) return say('Not done (' + r.status + '): ' + b.dataset.what + ': ' + (d.error || r.statusText), 'bad');
    say(b.dataset.past + ' ' + b.dataset.what + '.', 'good');
    return load();
  }

  document.addEventListener('click', (ev) => {
    const b = ev.target instanceof Element ? ev.target.closest('button[data-path]') : null;
    if (b) void act(b);
  });
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = input.value.trim();
    if (t === '') return;
    remember(t); input.value = ''; form.hidden = true; say('');
    void load();
  });
  document.addEventListener('visibilitychange', () => { if (!document.hidden) void load(); });
  void load();
})();
`;

const hash = (text: string): string => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;

/** The page's policy: its own style and script by hash; fetches to this origin; no frames, forms, plugins, bases. */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  `script-src ${hash(SCRIPT)}`,
  `style-src ${hash(STYLE)}`,
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

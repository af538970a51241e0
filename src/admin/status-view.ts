/**
 * @module The status page's layout, once: StatusData → titled tables of text cells. The server renders
 * them to HTML (status-page.ts) and the page's script to DOM nodes from `/status.json`'s `view`, so the
 * two cannot drift. Cells are plain text; whoever renders them escapes them.
 */
import type { FleetStatus, RuleStatus, StatusData, StoreStatus, UpstreamStatus } from './status-data.js';
import { ago, pair, perSecond, until, type Cell, type Section, type Tone } from './status-cells.js';
import { bansSection, entriesSection, limitedSection } from './status-guard-view.js';

export type { Cell, CellAction, Section, Tone } from './status-cells.js';
export { perSecond } from './status-cells.js';

export function statusView(d: StatusData): Section[] {
  const now = Date.parse(d.generatedAt);
  return [
    healthSection(d),
    rulesSection(d),
    ...(d.fleet !== null ? [fleetSection(d.fleet)] : []),
    upstreamSection(d.upstream, now),
    storeSection(d.store),
    bansSection(d.bans, now),
    entriesSection('blocks', 'Blocks', '/admin/blocks', d.blocks, now),
    entriesSection('exemptions', 'Exemptions', '/admin/exemptions', d.exemptions, now),
    limitedSection(d.limited),
    reloadsSection(d, now),
    ...(d.surges.length > 0 ? [surgesSection(d)] : []),
  ];
}

/** One line: `healthy: 2 replicas, upstream up, store up`, or what is wrong first. */
export function healthLine(d: StatusData): { text: string; tone: Tone } {
  const wrong: string[] = [];
  const p = d.upstream.probe;
  if (p !== null && !p.up) wrong.push(`upstream does not answer (${p.error ?? 'down'})`);
  const s = d.store;
  if (s.reachable === false || s.fallbackActive) wrong.push(`store failing: decisions by onError: ${s.onError}`);
  else for (const n of s.nodes) if (!n.up) wrong.push(`store node ${n.node} failing`);
  if (d.reloads[0] !== undefined && !d.reloads[0].ok)
    wrong.push('the last config reload was refused (the previous table is in force)');
  if (d.fleet?.error !== undefined) wrong.push(`the other replicas' rates are unknown (${d.fleet.error})`);
  const n = d.fleet === null ? 1 : d.fleet.replicas.length;
  const replicas = `${n} replica${n === 1 ? '' : 's'}${d.fleet === null ? ' (a store of this process only)' : ''}`;
  const upstream = p === null ? 'upstream not checked yet' : p.up ? 'upstream up' : '';
  const facts = [
    replicas,
    ...(upstream === '' ? [] : [upstream]),
    ...(wrong.some((w) => w.startsWith('store')) ? [] : ['store up']),
  ];
  if (wrong.length === 0) return { text: `healthy: ${facts.join(', ')}`, tone: 'good' };
  return { text: `degraded: ${wrong.join('; ')} · ${facts.join(', ')}`, tone: 'bad' };
}

function healthSection(d: StatusData): Section {
  return { id: 'health', title: 'Health', columns: [], rows: [], empty: '', line: healthLine(d) };
}

function fleetSection(f: FleetStatus): Section {
  const rows: Cell[][] = f.replicas.map((r) => [
    r.self ? { text: `${r.host} (pid ${r.pid}) · this one`, tone: 'muted' } : `${r.host} (pid ${r.pid})`,
    pair(r.rates['1m'].allowed, r.rates['5m'].allowed, 'good'),
    pair(r.rates['1m'].limited, r.rates['5m'].limited, 'bad'),
    pair(r.rates['1m'].shadowLimited, r.rates['5m'].shadowLimited, 'warn'),
    r.self ? 'live' : `${r.age}\u00a0s ago`,
  ]);
  if (f.replicas.length > 1) {
    const sum = (w: '1m' | '5m', k: 'allowed' | 'limited' | 'shadowLimited'): number =>
      f.replicas.reduce((a, r) => a + r.rates[w][k], 0);
    rows.push([
      'all replicas',
      pair(sum('1m', 'allowed'), sum('5m', 'allowed'), 'good'),
      pair(sum('1m', 'limited'), sum('5m', 'limited'), 'bad'),
      pair(sum('1m', 'shadowLimited'), sum('5m', 'shadowLimited'), 'warn'),
      '',
    ]);
  }
  const note = `Requests per second over the last minute · the last five minutes, all rules, per replica (each publishes its rates to the store every 5 s); ${f.gateways} gateway${f.gateways === 1 ? '' : 's'} by their heartbeats.`;
  return {
    id: 'fleet',
    title: 'Replicas',
    note: f.error === undefined ? note : `${note} The others' rates could not be read: ${f.error}.`,
    columns: ['replica', 'allowed/s', 'limited/s', 'shadow-limited/s', 'published'],
    rows,
    empty: '',
  };
}

function upstreamSection(u: UpstreamStatus, now: number): Section {
  const p = u.probe;
  const probe: Cell =
    p === null
      ? { text: 'not checked yet', tone: 'muted' }
      : p.up
        ? { text: `up: answered HEAD in ${p.ms} ms, ${ago(new Date(p.at).toISOString(), now)}`, tone: 'good' }
        : {
            text: `does not answer: ${p.error ?? 'down'} after ${p.ms} ms, ${ago(new Date(p.at).toISOString(), now)}`,
            tone: 'bad',
          };
  const ms = (x: number | null): string =>
    x === null ? '' : x === Infinity ? '> 30 s' : `≤ ${x >= 1000 ? `${x / 1000} s` : `${x} ms`}`;
  const latency =
    u.answered === 0
      ? 'no answer yet'
      : `p50 ${ms(u.p50Ms)} · p99 ${ms(u.p99Ms)} over ${u.answered} answers since start`;
  const failures = Object.entries(u.errors);
  return {
    id: 'upstream',
    title: 'Upstream',
    columns: ['what', 'state'],
    rows: [
      ['upstream', u.url],
      ['probe', probe],
      ['latency', latency],
      [
        'no answer',
        failures.length === 0
          ? { text: 'none since start', tone: 'good' }
          : {
              text: `${failures.map(([r, n]) => `${r} ${n}`).join(', ')} since start (502/504 by the gateway)`,
              tone: 'bad',
            },
      ],
      [
        'upstream 5xx',
        u.upstream5xx === 0
          ? 'none since start'
          : { text: `${u.upstream5xx} since start (the upstream's own)`, tone: 'warn' },
      ],
    ],
    empty: '',
    facts: true,
  };
}

function rulesSection(d: StatusData): Section {
  const covered = d.rules[0]?.rates['5m'].seconds ?? 0;
  const rate = (r: RuleStatus, k: 'allowed' | 'limited' | 'shadowLimited', tone: Tone): Cell => {
    const [m1, m5] = [r.rates['1m'][k], r.rates['5m'][k]];
    return { text: `${perSecond(m1)} · ${perSecond(m5)}`, num: true, ...(m1 > 0 || m5 > 0 ? { tone } : {}) };
  };
  return {
    id: 'rules',
    title: 'Rules',
    note: `Requests per second over the last minute · the last five minutes${covered < 300 ? ` (${covered} s of history so far)` : ''}; this replica.`,
    columns: ['rule', 'limit', 'allowed/s', 'limited/s', 'shadow-limited/s'],
    rows: d.rules.map((r) => [
      r.shadow ? { text: `${r.name} (shadow)`, tone: 'muted' } : r.name,
      `${r.limit} per ${r.period} per ${r.per}`,
      rate(r, 'allowed', 'good'),
      rate(r, 'limited', 'bad'),
      rate(r, 'shadowLimited', 'warn'),
    ]),
    empty: 'The table has no rules.',
  };
}

function storeSection(s: StoreStatus): Section {
  const rows: Cell[][] = [
    ['store', `${s.kind}${s.kind === 'memory' ? ' (this process only)' : ` ${s.url}`}`],
    [
      'decisions',
      s.reachable === false || s.fallbackActive
        ? { text: `from the fallback (onError: ${s.onError})`, tone: 'bad' }
        : { text: 'from the store', tone: 'good' },
    ],
    [
      'fallback',
      s.fallbackActive ? { text: `active (onError: ${s.onError})`, tone: 'bad' } : `off (onError: ${s.onError})`,
    ],
    [
      'leases',
      s.leases === null
        ? 'off'
        : `${s.leases.heldTokens} tokens held now; ${s.leases.localAdmissions} requests admitted from leases since start`,
    ],
  ];
  for (const n of s.nodes)
    rows.push([
      `node ${n.node}`,
      n.up ? { text: 'up', tone: 'good' } : { text: 'failing: its keys follow onError', tone: 'bad' },
    ]);
  return {
    id: 'store',
    title: 'Store',
    ...(s.kind === 'redis-cluster'
      ? { note: 'A cluster master is listed here once it has failed or recovered since start.' }
      : {}),
    columns: ['what', 'state'],
    rows,
    empty: '',
    facts: true,
  };
}

function reloadsSection(d: StatusData, now: number): Section {
  return {
    id: 'reloads',
    title: 'Config loads',
    note: 'The last loads of limits.yaml, newest first.',
    columns: ['when', 'what', 'result', 'details'],
    rows: d.reloads.map((r) => [
      ago(r.at, now),
      r.kind === 'start' ? 'start' : 'reload',
      r.ok
        ? { text: `in force: ${r.rules} rules`, tone: 'good' }
        : { text: 'refused: the previous table stays', tone: 'bad' },
      r.ok ? changes(r.live ?? [], r.atRestart ?? []) : (r.errors ?? []).join('; '),
    ]),
    empty: 'No load yet.',
  };
}

function surgesSection(d: StatusData): Section {
  const now = Date.parse(d.generatedAt);
  return {
    id: 'surges',
    title: 'Surges',
    columns: ['surge', 'state', 'since', 'until', 'trigger'],
    rows: d.surges.map((s) => [
      s.name,
      s.active ? { text: 'active', tone: 'bad' } : { text: 'idle', tone: 'muted' },
      s.since ? ago(s.since, now) : '',
      s.until ? until(s.until, now) : '',
      s.trigger ?? '',
    ]),
    empty: '',
  };
}

function changes(live: readonly string[], atRestart: readonly string[]): string {
  const parts = [];
  if (live.length > 0) parts.push(`changed: ${live.join(', ')}`);
  if (atRestart.length > 0) parts.push(`at the next restart: ${atRestart.join(', ')}`);
  return parts.join('; ');
}

/**
 * @module Writes the lists in docs that code defines (`npm run docs`): the `per` key kinds, the
 * restart-only settings, the metrics with their labels, the admin endpoints, the commands with their
 * flags and the exit codes, the error catalogue (answered and thrown), the source modules. Each sits in a doc between
 * `<!-- generated:ID … -->` and `<!-- /generated:ID -->`; test/docs/generated.test.ts checks they are current.
 */
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import client from 'prom-client';
import { ADMIN_ENDPOINTS } from '../src/admin/endpoints.js';
import { COMMANDS, flagLabel, type CommandSpec } from '../src/cli/commands.js';
import { EXIT_CODES } from '../src/cli/exit.js';
import { THROWN_ERRORS } from '../src/errors.js';
import { GATEWAY_ERRORS } from '../src/http/errors.js';
import { RESTART_ONLY } from '../src/config/changes.js';
import { GuardMetrics } from '../src/guard/metrics.js';
import { KIND_NAMES, KINDS } from '../src/keys/kinds.js';
import { needNames } from '../src/keys/needs.js';
import { DECISIONS, Metrics, RESPONSE_DECISIONS, STATUS_CLASSES } from '../src/observability/metrics.js';

export interface GeneratedBlock {
  /** The doc, from the repository's root. */
  readonly file: string;
  readonly id: string;
  /** Where it comes from, named in the opening marker. */
  readonly source: string;
  render(): Promise<string>;
}

const cell = (s: string): string => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

function perKinds(): string {
  const rows = KIND_NAMES.map((k) => {
    const kind = KINDS[k];
    const needs = needNames(kind.needs).join(', ') || '—';
    return `| \`${kind.syntax}\` | \`{${kind.tag}:…}\` | ${needs} | ${cell(kind.meaning)} |`;
  });
  return ['| `per:` | bucket tag | reads from the request | meaning |', '| --- | --- | --- | --- |', ...rows].join(
    '\n',
  );
}

function restartOnly(): string {
  return RESTART_ONLY.map((k) => `\`${k}\``).join(', ');
}

/** Label values that only appear with traffic, so a fresh registry cannot show them. */
const VALUES_WITH_TRAFFIC: Readonly<Record<string, Readonly<Record<string, readonly string[]>>>> = {
  rategate_requests_total: { decision: DECISIONS },
  rategate_upstream_duration_seconds: { status_class: STATUS_CLASSES },
  rategate_http_request_duration_seconds: { code_class: STATUS_CLASSES, decision: RESPONSE_DECISIONS },
};
/** Metrics whose label values are facts of the running process (its versions), not of the code. */
const VALUES_OF_THE_RUN = new Set(['rategate_build_info']);

interface MetricInfo {
  name: string;
  help: string;
  type: string;
  labelNames: readonly string[];
  values: Map<string, Set<string>>;
}

/** Every metric the gateway registers (Node's default process metrics aside), as a fresh process shows them. */
export async function gatewayMetrics(): Promise<MetricInfo[]> {
  const metrics = new Metrics({ collectDefault: false });
  new GuardMetrics(
    metrics.registry,
    () => null,
    () => [],
  );
  const objects = new Map(
    metrics.registry
      .getMetricsAsArray()
      .map((m) => [m.name, m as unknown as { labelNames?: readonly string[]; labelName?: string }]),
  );
  const out: MetricInfo[] = [];
  for (const m of (await metrics.registry.getMetricsAsJSON()) as Array<
    client.MetricObjectWithValues<client.MetricValue<string>>
  >) {
    const o = objects.get(m.name);
    const labelNames = o?.labelNames ?? (o?.labelName === undefined ? [] : [o.labelName]);
    const values = new Map<string, Set<string>>(
      labelNames.map((l) => [l, new Set(VALUES_WITH_TRAFFIC[m.name]?.[l] ?? [])]),
    );
    if (!VALUES_OF_THE_RUN.has(m.name))
      for (const v of m.values) for (const [l, val] of Object.entries(v.labels)) values.get(l)?.add(String(val));
    out.push({ name: m.name, help: m.help, type: String(m.type), labelNames, values });
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

async function metricsTable(): Promise<string> {
  const rows = (await gatewayMetrics()).map((m) => {
    const labels = m.labelNames.map((l) => {
      const known = [...(m.values.get(l) ?? [])];
      return known.length === 0 ? `\`${l}\`` : `\`${l}\` (${known.map((v) => `\`${v}\``).join(', ')})`;
    });
    return `| \`${m.name}\` | ${m.type} | ${labels.join(', ') || '—'} | ${cell(m.help)} |`;
  });
  return [
    '| metric | type | labels (values known in advance, shown at 0 from the start) | what it counts |',
    '| --- | --- | --- | --- |',
    ...rows,
  ].join('\n');
}

function adminEndpoints(): string {
  const rows = ADMIN_ENDPOINTS.map((e) => {
    const door = e.door === 'open' ? 'open' : 'admin token';
    return `| \`${e.method} ${e.path}\` | ${door}${e.singleProcess ? ', single process' : ''} | ${cell(e.what)} |`;
  });
  return ['| endpoint | door | what |', '| --- | --- | --- |', ...rows].join('\n');
}

/** The README's command table: each command's synopsis, what it does, and every flag it parses. */
function commandTable(): string {
  const rows = Object.values(COMMANDS as Record<string, CommandSpec>).map((c) => {
    const synopsis = `rategate ${c.name} ${c.synopsis.join(' ')}`.trim();
    const flags = Object.entries(c.flags).map(([n, f]) => `\`${flagLabel(n, f)}\`: ${f.help}`);
    return `| \`${cell(synopsis)}\` | ${cell([c.what, ...flags].join('<br>'))} |`;
  });
  return ['| command | what it does; its flags |', '| --- | --- |', ...rows].join('\n');
}

function exitCodes(): string {
  const rows = EXIT_CODES.map((e) => `| ${e.code} | ${e.name === '—' ? '—' : `\`${e.name}\``} | ${cell(e.when)} |`);
  return ['| exit | sysexits | when |', '| --- | --- | --- |', ...rows].join('\n');
}

function gatewayErrors(): string {
  const rows = Object.entries(GATEWAY_ERRORS).map(([code, e]) => `| \`${code}\` | ${e.status} | ${cell(e.message)} |`);
  return ['| `code` | status | `error` (the message) |', '| --- | --- | --- |', ...rows].join('\n');
}

function thrownErrors(): string {
  const rows = Object.entries(THROWN_ERRORS).map(([code, e]) => `| \`${code}\` | \`${e.thrower}\` | ${cell(e.when)} |`);
  return ['| `code` | thrown as | when |', '| --- | --- | --- |', ...rows].join('\n');
}

/** The first clause of a module's `@module` comment, about a line long: what the file is for. */
export function moduleSummary(text: string): string {
  const doc = /@module\s+([\s\S]*?)\*\//.exec(text)?.[1];
  if (doc === undefined) return '';
  const flat = doc
    .split('\n')
    .map((l) => l.replace(/^\s*\*\s?/, '').trim())
    .join(' ')
    .replace(/\s+/g, ' ')
    .trim();
  const sentence = /^(.+?[.!?])(?=\s+[A-Z(`]|$)/.exec(flat)?.[1] ?? flat;
  const clause = firstClause(sentence);
  if (clause.length <= 160) return clause.replace(/\.$/, '');
  const cut = clause.slice(0, 160);
  return `${cut.slice(0, cut.lastIndexOf(' '))} …`;
}

/** A sentence up to its first colon or semicolon outside brackets and code, once that says enough (30 characters). */
function firstClause(sentence: string): string {
  let depth = 0;
  let code = false;
  for (let i = 0; i < sentence.length; i++) {
    const c = sentence[i];
    if (c === '`') code = !code;
    else if (code) continue;
    else if (c === '(' || c === '[') depth++;
    else if (c === ')' || c === ']') depth--;
    else if (depth === 0 && (c === ':' || c === ';') && sentence[i + 1] === ' ' && i >= 30) return sentence.slice(0, i);
  }
  return sentence;
}

/** Every folder of src/ (and the files at its root), each file with its summary. */
function moduleTable(): string {
  const src = path.join(ROOT, 'src');
  const rows: string[] = [];
  const visit = (dir: string): void => {
    const entries = readdirSync(dir).sort();
    const files = entries.filter((f) => f.endsWith('.ts'));
    const rel = path.relative(ROOT, dir);
    const line = (f: string) => `\`${f}\` ${cell(moduleSummary(readFileSync(path.join(dir, f), 'utf8')))}`;
    if (dir === src)
      for (const f of files)
        rows.push(`| \`${rel}/${f}\` | ${cell(moduleSummary(readFileSync(path.join(dir, f), 'utf8')))} |`);
    else if (files.length > 0) rows.push(`| \`${rel}/\` | ${files.map(line).join('<br>')} |`);
    for (const e of entries) if (statSync(path.join(dir, e)).isDirectory()) visit(path.join(dir, e));
  };
  visit(src);
  return ['| module | its files, each with the first words of its `@module` comment |', '| --- | --- |', ...rows].join(
    '\n',
  );
}

export const GENERATED_BLOCKS: readonly GeneratedBlock[] = [
  { file: 'README.md', id: 'commands', source: 'src/cli/commands.ts', render: async () => commandTable() },
  { file: 'README.md', id: 'exit-codes', source: 'src/cli/exit.ts', render: async () => exitCodes() },
  { file: 'docs/errors.md', id: 'gateway-errors', source: 'src/http/errors.ts', render: async () => gatewayErrors() },
  { file: 'docs/errors.md', id: 'thrown-errors', source: 'src/errors.ts', render: async () => thrownErrors() },
  {
    file: 'docs/architecture.md',
    id: 'modules',
    source: "src/: each file's @module comment",
    render: async () => moduleTable(),
  },
  { file: 'docs/limit-table.md', id: 'per-kinds', source: 'src/keys/kinds.ts', render: async () => perKinds() },
  {
    file: 'docs/limit-table.md',
    id: 'restart-only',
    source: 'src/config/changes.ts',
    render: async () => restartOnly(),
  },
  {
    file: 'docs/operations.md',
    id: 'metrics',
    source: 'src/observability/metrics.ts, src/guard/metrics.ts',
    render: metricsTable,
  },
  {
    file: 'docs/operations.md',
    id: 'admin-endpoints',
    source: 'src/admin/endpoints.ts',
    render: async () => adminEndpoints(),
  },
];

export const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** `text` with each of its file's blocks rendered anew; throws when a block's markers are missing. */
export async function renderDoc(file: string, text: string): Promise<string> {
  let out = text;
  for (const block of GENERATED_BLOCKS.filter((b) => b.file === file)) {
    const open = `<!-- generated:${block.id} `;
    const close = `<!-- /generated:${block.id} -->`;
    const start = out.indexOf(open);
    const end = out.indexOf(close);
    if (start === -1 || end < start) throw new Error(`${file} has no ${open}…--> … ${close} markers`);
    // Inside a list item the block keeps the item's indentation.
    const indent = /[ \t]*$/.exec(out.slice(0, start))![0];
    const marker = `${open}(npm run docs, from ${block.source}: do not edit by hand) -->`;
    const body = (await block.render()).replace(/^/gm, indent);
    out = `${out.slice(0, start)}${marker}\n${body}\n${indent}${out.slice(end)}`;
  }
  return out;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  for (const file of new Set(GENERATED_BLOCKS.map((b) => b.file))) {
    const path = `${ROOT}${file}`;
    writeFileSync(path, await renderDoc(file, readFileSync(path, 'utf8')));
    console.log(`wrote ${path}`);
  }
}

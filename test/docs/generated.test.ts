/**
 * @module The lists in docs that code defines must be what the code defines: the generated blocks
 * (scripts/gen-docs.ts: `per` kinds, restart-only settings, metrics, admin endpoints) are current, every
 * metric a doc, the chart's alerts or its dashboard names exists, every line listing key kinds lists
 * them all, and every admin endpoint listed is one the real admin listener serves (and the other way round).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GENERATED_BLOCKS, ROOT, gatewayMetrics, renderDoc } from '../../scripts/gen-docs.js';
import { ADMIN_ENDPOINTS } from '../../src/admin/endpoints.js';
import { COMMANDS } from '../../src/cli/commands.js';
import { parseYaml, validateConfig } from '../../src/config/load.js';
import { KIND_NAMES, KINDS } from '../../src/keys/kinds.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { send } from '../support/http.js';

const read = (file: string): string => readFileSync(path.join(ROOT, file), 'utf8');
const docs = [
  'README.md',
  ...readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
const chart = [
  'helm/rategate/README.md',
  'helm/rategate/alerts/rategate.rules.yaml',
  'helm/rategate/dashboards/rategate.json',
];

describe('docs generated from code', () => {
  for (const file of new Set(GENERATED_BLOCKS.map((b) => b.file))) {
    it(`${file} holds the current lists (run \`npm run docs\` after changing them)`, async () => {
      expect(read(file)).toBe(await renderDoc(file, read(file)));
    });
  }

  it('names only metrics the gateway registers (docs, the chart, its alerts and dashboard)', async () => {
    const known = new Set((await gatewayMetrics()).map((m) => m.name));
    const unknown: string[] = [];
    for (const file of [...docs, ...chart]) {
      for (const [name] of read(file).matchAll(/\brategate_[a-z0-9_]*[a-z0-9]/g)) {
        const base = name.replace(/_(bucket|sum|count)$/, '');
        if (!known.has(name) && !known.has(base)) unknown.push(`${file}: ${name}`);
      }
    }
    expect(unknown).toEqual([]);
  });

  it('lists every key kind, in the table order, wherever it lists them', () => {
    const syntaxes = KIND_NAMES.map((k) => KINDS[k].syntax);
    const partial: string[] = [];
    for (const file of docs) {
      // Paragraphs (and table rows): a list may wrap.
      for (const line of read(file).split(/\n\s*\n|\n(?=\|)/)) {
        // A paragraph naming two of the named kinds is a list of kinds.
        if (!line.includes('header:NAME') || !line.includes('param:NAME')) continue;
        const missing = syntaxes.filter((s) => !new RegExp(`(?<![\\w:-])${s}(?![\\w:])`).test(line));
        if (missing.length > 0) partial.push(`${file}: lacks ${missing.join(', ')}: ${line.trim().slice(0, 80)}`);
      }
    }
    expect(partial).toEqual([]);
    const perRow = read('docs/limit-table.md')
      .split('\n')
      .find((l) => l.startsWith('| `per` |'));
    const listed = [...(perRow ?? '').matchAll(/`([a-z]+(?::[A-Za-z]+)?)`/g)]
      .map((m) => m[1])
      .filter((s) => s !== 'per');
    expect(listed.slice(0, syntaxes.length)).toEqual(syntaxes);
  });
});

describe('the command table', () => {
  it('lists every command the command line dispatches, and nothing it does not', () => {
    const cases = [...read('src/cli/index.ts').matchAll(/^\s+case '([a-z-]+)':/gm)].map((m) => m[1]!);
    const dispatched = cases.filter((c) => !['help', '-h', '--help', '-v', 'version'].includes(c));
    expect(new Set(dispatched)).toEqual(new Set(Object.values(COMMANDS).map((c) => c.name)));
  });
});

describe('the admin endpoints', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway('limits:\n  - { name: r, match: /*, per: ip, limit: 5, period: 1m }\n', {
      upstream: 'http://127.0.0.1:9',
    });
  });
  afterAll(async () => gw?.shutdown(0));

  it('each one listed is served by the admin listener', async () => {
    const unserved: string[] = [];
    for (const e of ADMIN_ENDPOINTS) {
      const target = e.path
        .replace(/<ip-or-cidr>/, '203.0.113.9')
        .replace(/<ban>\/<key>/, 'no-such-ban/ip%3A203.0.113.9');
      const body =
        e.method === 'POST' ? JSON.stringify({ ip: '203.0.113.9', for: '1m', reason: 'drift test' }) : undefined;
      const a = await send(gw.adminUrl, {
        method: e.method,
        path: target,
        ...(body ? { body, headers: { 'content-type': 'application/json' } } : {}),
      });
      // The router's own 404 (`Not found`) or a 405 means the method and path lead nowhere.
      if (a.status === 405 || (a.status === 404 && /^\{"error":"Not found"\}$/.test(a.body)))
        unserved.push(`${e.method} ${e.path} → ${a.status} ${a.body}`);
    }
    expect(unserved).toEqual([]);
  });

  it('lists every path the admin router matches', () => {
    const listed = ADMIN_ENDPOINTS.map((e) => e.path.replace(/\/<.*$/, ''));
    const matched = new Set<string>();
    for (const file of ['server.ts', 'guard-api.ts', 'status-route.ts']) {
      const text = read(`src/admin/${file}`);
      for (const [, p] of text.matchAll(/'(\/(?:admin\/[a-z]+|metrics|healthz|readyz|status(?:\.json)?)?)\/?'/g))
        matched.add(p!);
    }
    matched.delete('/admin');
    expect([...matched].filter((p) => !listed.includes(p))).toEqual([]);
    expect(matched.size).toBeGreaterThanOrEqual(10);
  });
});

/** Optional keys whose absence means this value (the schema leaves them unset). */
const IMPLIED: Record<string, unknown> = { 'upstream.host': 'upstream' };

describe("docs/limit-table.md's sections with their defaults", () => {
  it('are the defaults the config loader applies', () => {
    const doc = read('docs/limit-table.md');
    const start = doc.indexOf('Other sections, all optional, with their defaults:');
    const block = /```yaml\n([\s\S]*?)```/.exec(doc.slice(start))?.[1];
    expect(block).toBeDefined();
    const written = validateConfig({ ...(parseYaml(block!, 'docs') as object), limits: [] });
    const defaults = validateConfig({ limits: [] });
    if (!written.ok || !defaults.ok) throw new Error(`not a valid config: ${JSON.stringify(written)}`);
    const differ: string[] = [];
    const walk = (a: unknown, b: unknown, at: string): void => {
      // `bodyLimits` there is an example ("e.g."), not a default.
      if (at === 'server.bodyLimits') return;
      if (a !== null && typeof a === 'object' && !Array.isArray(a) && b !== null && typeof b === 'object') {
        for (const k of Object.keys(a))
          walk((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], at === '' ? k : `${at}.${k}`);
      } else if (JSON.stringify(a) !== JSON.stringify(b === undefined && at in IMPLIED ? IMPLIED[at] : b))
        differ.push(`${at}: doc ${JSON.stringify(a)}, default ${JSON.stringify(b)}`);
    };
    walk(written.config, defaults.config, '');
    expect(differ).toEqual([]);
  });
});

describe('files the docs name', () => {
  it('exist', () => {
    const missing: string[] = [];
    for (const file of [...docs, 'helm/rategate/README.md']) {
      for (const [p] of read(file).matchAll(
        /\b(?:src|test|scripts|bench|config)\/[A-Za-z0-9_./-]+\.(?:ts|yaml|json|mjs|rb)\b/g,
      )) {
        if (!existsSync(path.join(ROOT, p))) missing.push(`${file}: ${p}`);
      }
    }
    expect(missing).toEqual([]);
  });
});

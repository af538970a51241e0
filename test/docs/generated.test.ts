/**
 * @module The lists in docs that code defines must be what the code defines: the generated blocks
 * (scripts/gen-docs.ts: `per` kinds, restart-only settings, metrics, admin endpoints) are current, every
 * metric a doc, the chart's alerts or its dashboard names exists, every line listing key kinds lists
 * them all, and every admin endpoint listed is one the real admin listener serves (and the other way round).
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GENERATED_BLOCKS, ROOT, gatewayMetrics, renderDoc } from '../../scripts/gen-docs.js';
import { ADMIN_ENDPOINTS } from '../../src/admin/endpoints.js';
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
const chart = ['helm/rategate/README.md', 'helm/rategate/alerts/rategate.rules.yaml', 'helm/rategate/dashboards/rategate.json'];

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
    const listed = [...(perRow ?? '').matchAll(/`([a-z]+(?::[A-Za-z]+)?)`/g)].map((m) => m[1]).filter((s) => s !== 'per');
    expect(listed.slice(0, syntaxes.length)).toEqual(syntaxes);
  });
});

describe('the admin endpoints', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway('limits:\n  - { name: r, match: /*, per: ip, limit: 5, period: 1m }\n', { upstream: 'http://127.0.0.1:9' });
  });
  afterAll(async () => gw?.shutdown(0));

  it('each one listed is served by the admin listener', async () => {
    const unserved: string[] = [];
    for (const e of ADMIN_ENDPOINTS) {
      const target = e.path.replace(/<ip-or-cidr>/, '203.0.113.9').replace(/<ban>\/<key>/, 'no-such-ban/ip%3A203.0.113.9');
      const body = e.method === 'POST' ? JSON.stringify({ ip: '203.0.113.9', for: '1m', reason: 'drift test' }) : undefined;
      const a = await send(gw.adminUrl, { method: e.method, path: target, ...(body ? { body, headers: { 'content-type': 'application/json' } } : {}) });
      // The router's own 404 (`Not found`) or a 405 means the method and path lead nowhere.
      if (a.status === 405 || (a.status === 404 && /^\{"error":"Not found"\}$/.test(a.body))) unserved.push(`${e.method} ${e.path} → ${a.status} ${a.body}`);
    }
    expect(unserved).toEqual([]);
  });

  it('lists every path the admin router matches', () => {
    const listed = ADMIN_ENDPOINTS.map((e) => e.path.replace(/\/<.*$/, ''));
    const matched = new Set<string>();
    for (const file of ['server.ts', 'guard-api.ts', 'status-route.ts']) {
      const text = read(`src/admin/${file}`);
      for (const [, p] of text.matchAll(/'(\/(?:admin\/[a-z]+|metrics|healthz|readyz|status(?:\.json)?)?)\/?'/g)) matched.add(p!);
    }
    matched.delete('/admin');
    expect([...matched].filter((p) => !listed.includes(p))).toEqual([]);
    expect(matched.size).toBeGreaterThanOrEqual(10);
  });
});

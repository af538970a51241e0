/**
 * @module Writes the JSON Schemas generated from the zod schema (`npm run schema`): config/limits.schema.json,
 * and the generated parts of the chart's helm/rategate/values.schema.json (the limit rule and `config`).
 * Tests check both are current.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { configSchema } from '../src/config/schema.js';

export const SCHEMA_PATH = fileURLToPath(new URL('../config/limits.schema.json', import.meta.url));
export const CHART_SCHEMA_PATH = fileURLToPath(new URL('../helm/rategate/values.schema.json', import.meta.url));

/** The JSON Schema of what may be written in the file (durations as strings or integers). */
export function buildJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(configSchema, { io: 'input', target: 'draft-2020-12' }) as Record<string, unknown>;
  return { ...schema, title: 'rategate limits.yaml' };
}

/** The exact text checked in, so the drift test compares bytes. */
export function renderJsonSchema(): string {
  return `${JSON.stringify(buildJsonSchema(), null, 2)}\n`;
}

type Json = Record<string, unknown>;
const GENERATED = 'Generated from src/config/schema.ts by `npm run schema`; do not edit by hand.';

/** JSON Schema's own formats; zod also writes names of its own (`starts_with`) that validators reject or ignore. */
const STANDARD_FORMATS = new Set([
  'date-time',
  'date',
  'time',
  'email',
  'hostname',
  'ipv4',
  'ipv6',
  'uri',
  'uri-reference',
  'regex',
  'uuid',
]);

function dropZodFormats(node: unknown): void {
  if (Array.isArray(node)) node.forEach(dropZodFormats);
  else if (node !== null && typeof node === 'object') {
    const o = node as Json;
    if (typeof o.format === 'string' && !STANDARD_FORMATS.has(o.format)) delete o.format;
    Object.values(o).forEach(dropZodFormats);
  }
}

/** The generated parts of values.schema.json: `definitions.rule` and `properties.config` (draft-07, as Helm reads). */
export function buildChartParts(): { rule: Json; config: Json } {
  const full = z.toJSONSchema(configSchema, { io: 'input', target: 'draft-7' }) as Json;
  dropZodFormats(full);
  const props = full.properties as Record<string, Json>;
  const limits = props.limits as { anyOf: Json[] };
  const rule = limits.anyOf.find((o) => o.type === 'array')?.items as Json | undefined;
  if (rule === undefined) throw new Error('the zod schema has no limits array');
  // Every key the file accepts, the ones the chart sets itself included: the templates refuse those with
  // a message naming the value to use, which says more than a schema error would.
  const config = structuredClone(full);
  delete config.$schema;
  return {
    rule: { $comment: GENERATED, ...rule },
    config: {
      $comment: GENERATED,
      ...config,
      description:
        'Other sections of limits.yaml. The chart refuses the keys it sets from values of its own (limits, listen, admin.listen, upstream.url, store.url) and admin.token (use the value admin.token).',
    },
  };
}

/** values.schema.json with its generated parts replaced; everything else (the chart's own values) kept as written. */
export function renderChartSchema(currentText: string): string {
  const current = JSON.parse(currentText) as Json;
  const { rule, config } = buildChartParts();
  const definitions = { ...(current.definitions as Json), rule };
  const properties = { ...(current.properties as Json), config };
  const next: Json = {};
  for (const [key, value] of Object.entries(current))
    next[key] = key === 'definitions' ? definitions : key === 'properties' ? properties : value;
  return `${JSON.stringify(next, null, 2)}\n`;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeFileSync(SCHEMA_PATH, renderJsonSchema());
  console.log(`wrote ${SCHEMA_PATH}`);
  writeFileSync(CHART_SCHEMA_PATH, renderChartSchema(readFileSync(CHART_SCHEMA_PATH, 'utf8')));
  console.log(`wrote ${CHART_SCHEMA_PATH}`);
}

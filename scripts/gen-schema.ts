/** @module Writes config/limits.schema.json from the zod schema (`npm run schema`); a test checks it is current. */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { configSchema } from '../src/config/schema.js';

export const SCHEMA_PATH = fileURLToPath(new URL('../config/limits.schema.json', import.meta.url));

/** The JSON Schema of what may be written in the file (durations as strings or integers). */
export function buildJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(configSchema, { io: 'input', target: 'draft-2020-12' }) as Record<string, unknown>;
  return { ...schema, title: 'rategate limits.yaml' };
}

/** The exact text checked in, so the drift test compares bytes. */
export function renderJsonSchema(): string {
  return `${JSON.stringify(buildJsonSchema(), null, 2)}\n`;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeFileSync(SCHEMA_PATH, renderJsonSchema());
  console.log(`wrote ${SCHEMA_PATH}`);
}

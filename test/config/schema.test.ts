/** @module The checked-in JSON Schema must be the one generated from the zod schema. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { buildJsonSchema, renderJsonSchema, SCHEMA_PATH } from '../../scripts/gen-schema.js';

describe('config/limits.schema.json', () => {
  it('matches the zod schema (run `npm run schema` after changing it)', () => {
    expect(readFileSync(SCHEMA_PATH, 'utf8')).toBe(renderJsonSchema());
  });

  it('describes the file as written: durations as strings or integers, defaults as written', () => {
    const schema = buildJsonSchema() as {
      additionalProperties: unknown;
      properties: Record<
        string,
        {
          default?: unknown;
          properties?: Record<string, { default?: unknown; anyOf?: unknown[]; description?: string }>;
        }
      >;
    };
    expect(schema.additionalProperties).toBe(false);
    const timeout = schema.properties.upstream?.properties?.timeout;
    expect(timeout?.default).toBe('30s');
    expect(timeout?.description).toMatch(/upstream/);
    expect(timeout?.anyOf).toEqual([
      { type: 'string', pattern: '^(?:[0-9]+|(?:[0-9]+(?:ms|s|m|h|d))+)$' },
      { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
    ]);
    expect(schema.properties.listen?.default).toBe('0.0.0.0:8080');
  });

  it('requires only name, match, per, limit and period in a rule, and rejects other keys', () => {
    const limits = (
      buildJsonSchema() as {
        properties: { limits: { anyOf: Array<{ items?: { required: string[]; additionalProperties: unknown } }> } };
      }
    ).properties.limits;
    const items = limits.anyOf.find((o) => o.items !== undefined)?.items;
    expect(items?.required).toEqual(['name', 'match', 'per', 'limit', 'period']);
    expect(items?.additionalProperties).toBe(false);
  });
});

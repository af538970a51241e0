/**
 * @module The shape DESIGN.md asks of `src/`, checked on the source: no import cycle (a module is read
 * from the bottom up), the status page's types imported by nobody below the status page, and one place
 * that tells a value from a promise — the pipeline's driver (pipeline/drive.ts); every other module
 * returns what it has and lets the driver wait.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { importCycles, importGraph, SRC, sourceFiles } from './source-imports.js';

/** The one file allowed to ask whether a stage's verdict is a promise. */
const DRIVER = path.join('pipeline', 'drive.ts');

describe('the structure of src/', () => {
  it('has no import cycle (type-only imports included)', () => {
    expect(importCycles(importGraph())).toEqual([]);
  });

  it('finds a cycle when there is one (the check can fail)', () => {
    const g = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts']],
      ['d.ts', ['a.ts']],
    ]);
    expect(importCycles(g)).toEqual([['a.ts', 'b.ts', 'c.ts']]);
  });

  it("keeps the status page's modules to the admin listener and what starts it", () => {
    const below: string[] = [];
    for (const [file, deps] of importGraph()) {
      if (/^(admin|app|cli)\//.test(file)) continue;
      for (const d of deps) if (/^admin\/status-/.test(d)) below.push(`${file} → ${d}`);
    }
    expect(below).toEqual([]);
  });

  it('tests for a promise only in the driver', () => {
    const sniffing: string[] = [];
    for (const file of sourceFiles()) {
      if (file === DRIVER) continue;
      const lines = readFileSync(path.join(SRC, file), 'utf8').split('\n');
      lines.forEach((line, i) => {
        if (/instanceof\s+Promise\b|\.then\s*===?|typeof\s+[\w.?]+\.then\b|['"]then['"]\s+in\b/.test(line))
          sniffing.push(`${file}:${i + 1}: ${line.trim()}`);
      });
    }
    expect(sniffing).toEqual([]);
  });
});

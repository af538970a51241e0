/**
 * The suite's own rule (issue 41): a test's or a hook's timeout is written for an idle machine and
 * stretched by the measured slowdown (`scaledMs`, test/support/speed.ts), never a bare number, so a run
 * beside a loaded CPU gets the time it needs. vitest's defaults are scaled in vitest.config.ts; this
 * finds an `it(…, fn, 60_000)` that would override them with a fixed one.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const HOOKS = new Set(['it', 'test', 'beforeAll', 'afterAll', 'beforeEach', 'afterEach']);

/** `it`, `it.skipIf(x)`, `it.each(rows)`: the name the call chain starts from. */
function rootName(e: ts.Expression): string | undefined {
  for (;;) {
    if (ts.isIdentifier(e)) return e.text;
    if (ts.isPropertyAccessExpression(e) || ts.isCallExpression(e)) e = e.expression;
    else return undefined;
  }
}

/** `file:line` of every test or hook call in `text` whose timeout is a number literal. */
export function fixedTimeouts(file: string, text: string): string[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (n: ts.Node): void => {
    if (ts.isCallExpression(n) && n.arguments.length >= 2) {
      const name = rootName(n.expression);
      const last = n.arguments[n.arguments.length - 1]!;
      const fn = n.arguments[n.arguments.length - 2]!;
      if (name !== undefined && HOOKS.has(name) && ts.isNumericLiteral(last) && ts.isFunctionLike(fn))
        found.push(`${file}:${sf.getLineAndCharacterOfPosition(last.getStart(sf)).line + 1}`);
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return found;
}

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const p = path.join(dir, d.name);
    if (d.isDirectory()) return d.name === 'fixtures' ? [] : testFiles(p);
    return p.endsWith('.ts') ? [p] : [];
  });
}

describe('the timeouts of the suite', () => {
  it('are scaled by the machine speed in every test file', () => {
    const fixed = testFiles('test').flatMap((f) => fixedTimeouts(f, readFileSync(f, 'utf8')));
    expect(fixed).toEqual([]);
  });

  it('finds a fixed one (the check can fail)', () => {
    const text = `it('a', async () => {}, 60_000);\nit.skipIf(x)('b', () => {}, scaledMs(5));\nbeforeAll(() => {}, 9);`;
    expect(fixedTimeouts('t.ts', text)).toEqual(['t.ts:1', 't.ts:3']);
  });
});

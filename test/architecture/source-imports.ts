/**
 * @module The import graph of `src/`, read with the TypeScript compiler's own pre-processor: every
 * relative `import`, `import type`, `export … from` and `import()` of each file, resolved to the file it
 * names. What the structure tests walk; no module is loaded.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

export const SRC = path.resolve(import.meta.dirname, '../../src');

/** Every `.ts` file under `dir`, as paths relative to `src/`. */
export function sourceFiles(dir = SRC): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(full));
    else if (e.name.endsWith('.ts')) out.push(path.relative(SRC, full));
  }
  return out.sort();
}

/** File (relative to `src/`) → the files of `src/` it imports. */
export function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles()) {
    const text = readFileSync(path.join(SRC, file), 'utf8');
    const { importedFiles } = ts.preProcessFile(text, true, true);
    const deps: string[] = [];
    for (const { fileName } of importedFiles) {
      if (!fileName.startsWith('.')) continue;
      const target = path.relative(SRC, path.resolve(SRC, path.dirname(file), fileName)).replace(/\.js$/, '.ts');
      if (!target.startsWith('..')) deps.push(target);
    }
    graph.set(file, deps);
  }
  return graph;
}

/** Each cycle of the graph once, as the files around it (Tarjan's strongly connected components of more than one file, or a file importing itself). */
export function importCycles(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  let next = 0;
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const scc: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      scc.push(w);
    } while (w !== v);
    if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) cycles.push(scc.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return cycles;
}

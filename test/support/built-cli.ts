/**
 * @module The gateway as the suite's spawned processes run it: src/ compiled once per source state into
 * .build/test-dist/<hash>/ (esbuild, one output file per module, as tsx compiles them on the fly), so a
 * spawned `rategate` starts on plain Node. Through tsx every process compiled its ~200 modules again at
 * start-up: seconds each, 20 s at load 25. Built by vitest's globalSetup (test/support/global-setup.ts).
 */
import { createHash, randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SRC = path.join(ROOT, 'src');
/** Under .build/ (ignored by git, already the home of the chart renderer and the image's Node). */
const OUT = path.join(ROOT, '.build', 'test-dist');

/** Every file under `dir`, sorted, relative to it. */
function filesUnder(dir: string, rel = ''): string[] {
  const out: string[] = [];
  for (const e of readdirSync(path.join(dir, rel), { withFileTypes: true }).sort((a, b) =>
    a.name.localeCompare(b.name),
  )) {
    const p = path.join(rel, e.name);
    if (e.isDirectory()) out.push(...filesUnder(dir, p));
    else out.push(p);
  }
  return out;
}

/** The files of src/ the build compiles or copies, relative to src/. */
export function sourceFiles(): string[] {
  return filesUnder(SRC);
}

/** The hash of what the build reads: every file of src/, the compiler options, the esbuild version and this module. */
function sourceHash(files: readonly string[]): string {
  const h = createHash('sha256');
  for (const f of files)
    h.update(f)
      .update('\0')
      .update(readFileSync(path.join(SRC, f)))
      .update('\0');
  h.update(readFileSync(path.join(ROOT, 'tsconfig.json')));
  h.update(readFileSync(fileURLToPath(import.meta.url)));
  h.update(readFileSync(path.join(ROOT, 'node_modules', 'esbuild', 'package.json')));
  return h.digest('hex').slice(0, 16);
}

/**
 * Compiles src/ when no build of its current state exists, and returns the path of that build's
 * cli/index.js. Built aside and renamed into place, so two runs at once never start a half-written
 * build.
 */
export function buildCli(): Promise<string> {
  // One build per process: each project's globalSetup asks.
  building ??= build().finally(() => (building = undefined));
  return building;
}

let building: Promise<string> | undefined;

async function build(): Promise<string> {
  const files = sourceFiles();
  const hash = sourceHash(files);
  const dir = path.join(OUT, hash);
  const cli = path.join(dir, 'cli', 'index.js');
  if (existsSync(cli)) return cli;
  const tmp = `${dir}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  mkdirSync(OUT, { recursive: true });
  const esbuild = await import('esbuild');
  await esbuild.build({
    entryPoints: files.filter((f) => f.endsWith('.ts')).map((f) => path.join(SRC, f)),
    outdir: tmp,
    outbase: SRC,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    sourcemap: true,
    logLevel: 'silent',
  });
  // What tsc leaves to scripts/copy-assets.mjs: the Lua scripts, read beside their module.
  for (const f of files.filter((f) => !f.endsWith('.ts'))) cpSync(path.join(SRC, f), path.join(tmp, f));
  try {
    renameSync(tmp, dir);
  } catch (err) {
    // Another run finished the same build first: use it.
    rmSync(tmp, { recursive: true, force: true });
    if (!existsSync(cli)) throw err;
  }
  // Builds of older sources, an hour old (a run started before an edit may still be using one).
  for (const old of readdirSync(OUT)) {
    const p = path.join(OUT, old);
    if (old !== hash && Date.now() - statSync(p).mtimeMs > 3_600_000) rmSync(p, { recursive: true, force: true });
  }
  return cli;
}

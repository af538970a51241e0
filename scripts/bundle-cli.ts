/**
 * Bundles `rategate check` after tsc (`npm run build`, issue 29: a check starts in about twice `node -e 0`):
 * dist/cli/check.bundle.cjs holds the command with the config code, zod and yaml inlined, and
 * check.bundle.cjs.cache the V8 code of every function a check of the shipped tables ran. The command line
 * runs it through src/cli/bundled.ts. Measured (bench/startup.ts): Node spends most of an unbundled check
 * resolving, reading and compiling ~200 module files (zod's 95, yaml's 60, the config code's 40); one file,
 * without zod's unused parts (its locales, JSON Schema conversion), is read once, and the code cache spares
 * compiling yaml's and zod's functions one by one as they first run. Only this leaf command is bundled:
 * it shares no state with the gateway's modules, which stay tsc's output. esbuild is a dev dependency only.
 *
 *   npx tsx scripts/bundle-cli.ts            (run by `npm run build`)
 */
import { build, type Metafile, type Plugin } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The serving side's packages: check must never reach them, so the bundle fails if it does. */
export const SERVING_PACKAGES = ['pino', 'undici', 'ioredis', 'prom-client', 'http-proxy', 'busboy', '@opentelemetry'];

/** The tables a check runs to warm the code cache (from the folder the build runs in). */
export const WARM_TABLES = ['config/limits.yaml', 'config/examples/mastodon.yaml'];

const noServingModules: Plugin = {
  name: 'no-serving-modules',
  setup(b) {
    const filter = new RegExp(`^(${SERVING_PACKAGES.join('|')})(/|$)`);
    b.onResolve({ filter }, (args) => ({
      errors: [{ text: `check must not load ${args.path} (imported by ${args.importer})` }],
    }));
  },
};

/** Bundles `entry` (the module exporting `check`, compiled or .ts) into `outfile` (CommonJS); returns esbuild's metafile. */
export async function bundleCheck(entry: string, outfile: string): Promise<Metafile> {
  const result = await build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    // Whitespace and syntax only: names stay readable in a stack trace (full minification saves nothing measurable).
    minifyWhitespace: true,
    minifySyntax: true,
    metafile: true,
    logLevel: 'silent',
    plugins: [noServingModules],
  });
  return result.metafile;
}

/**
 * Writes `bundle`.cache: a fresh Node (the one running this, with no flags: V8 rejects a cache made under
 * other flags or another version) compiles the bundle through `loader` (src/cli/bundled.ts, compiled), runs
 * `check` on each table, then asks V8 for the code of every function compiled so far.
 */
export function makeCodeCache(file: string, loader: string, tables: readonly string[] = WARM_TABLES): void {
  const bundle = path.resolve(file);
  rmSync(`${bundle}.cache`, { force: true });
  const script = `
    import { writeFileSync } from 'node:fs';
    const { compileBundle, runScript } = await import(${JSON.stringify(pathToFileURL(loader).href)});
    const bundle = ${JSON.stringify(bundle)};
    const { script } = compileBundle(bundle);
    const { check } = runScript(script, bundle);
    for (const table of ${JSON.stringify(tables)}) await check([table]);
    writeFileSync(bundle + '.cache', script.createCachedData());`;
  execFileSync(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'ignore', 'inherit'] });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await bundleCheck('dist/cli/check.js', 'dist/cli/check.bundle.cjs');
  makeCodeCache('dist/cli/check.bundle.cjs', 'dist/cli/bundled.js');
}

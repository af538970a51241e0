/**
 * Bundles `rategate check` into one file after tsc (`npm run build`): dist/cli/check.js is replaced by
 * itself with the config code, zod and yaml inlined (issue 29: a check starts in about twice `node -e 0`).
 * Node spends most of an unbundled check resolving, reading and compiling ~200 module files (zod's 95,
 * yaml's 60, the config code's 40); one file, without zod's unused parts (its locales, JSON Schema
 * conversion), is read and compiled once. Only this leaf command is bundled: it shares no state with the
 * gateway's modules, which stay tsc's output, one file per module. esbuild is a dev dependency only.
 *
 *   npx tsx scripts/bundle-cli.ts            (run by `npm run build`)
 */
import { build, type Metafile, type Plugin } from 'esbuild';
import { fileURLToPath } from 'node:url';

/** The serving side's packages: check must never reach them, so the bundle fails if it does. */
export const SERVING_PACKAGES = ['pino', 'undici', 'ioredis', 'prom-client', 'http-proxy', 'busboy'];

const noServingModules: Plugin = {
  name: 'no-serving-modules',
  setup(b) {
    const filter = new RegExp(`^(${SERVING_PACKAGES.join('|')})(/|$)`);
    b.onResolve({ filter }, (args) => ({ errors: [{ text: `check must not load ${args.path} (imported by ${args.importer})` }] }));
  },
};

/** Bundles `entry` (the module exporting `check`, compiled or .ts) into `outfile`; returns esbuild's metafile. */
export async function bundleCheck(entry: string, outfile: string): Promise<Metafile> {
  const result = await build({
    entryPoints: [entry],
    outfile,
    allowOverwrite: true,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    // Whitespace and syntax only: names stay readable in a stack trace (full minification saves nothing measurable).
    minifyWhitespace: true,
    minifySyntax: true,
    sourcemap: true,
    metafile: true,
    logLevel: 'warning',
    // yaml's Node build is CommonJS and requires Node built-ins: give the ESM bundle a require.
    banner: { js: "import { createRequire as __rategateRequire } from 'node:module'; const require = __rategateRequire(import.meta.url);" },
    plugins: [noServingModules],
  });
  return result.metafile;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await bundleCheck('dist/cli/check.js', 'dist/cli/check.js');
}

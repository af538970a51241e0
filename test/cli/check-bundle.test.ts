/**
 * Issue 29: `rategate check` as the build ships it, one bundled file and its V8 code cache
 * (scripts/bundle-cli.ts), run by src/cli/bundled.ts. The bundle holds only the config code, zod, yaml and
 * ipaddr.js (never a serving module), loads no other file when it runs, its code cache is used, and it
 * answers exactly as the unbundled command does: the same output, errors with their place and exit codes.
 * Start-up time itself is reported by bench/startup.ts, not asserted (a shared machine's clock).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Metafile } from 'esbuild';
import { build } from 'esbuild';
import { bundleCheck, makeCodeCache } from '../../scripts/bundle-cli.js';
import { ROOT } from '../packaging/support.js';
import { builtCli } from '../support/process.js';
import { scaledMs } from '../support/speed.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-bundle-'));
const BUNDLE = path.join(dir, 'cli', 'check.bundle.cjs');
const LOADER = path.join(dir, 'cli', 'bundled.mjs');

/** A module hook that prints the URL of every file module loaded after it. */
const tracer = path.join(dir, 'trace.mjs');
writeFileSync(
  tracer,
  `import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent(\`export async function load(url, context, next) {
  if (url.startsWith('file:')) process._rawDebug('LOADED ' + url);
  return next(url, context);
}\`));
`,
);

/** What index.ts does for `check` after a build; then reports which code cache it had and the CommonJS files it loaded. */
const RUN_BUNDLE = `
  import { createRequire } from 'node:module';
  const { runBundle } = await import(${JSON.stringify(pathToFileURL(LOADER).href)});
  const bundle = runBundle(${JSON.stringify(BUNDLE)});
  process.exitCode = await bundle.exports.check(process.argv.slice(1));
  process._rawDebug('CACHE ' + bundle.cache);
  for (const file of Object.keys(createRequire(${JSON.stringify(BUNDLE)}).cache)) process._rawDebug('LOADED ' + file);`;

/** Runs `check` from the bundle (with the tracer), or from the suite's build of the sources, unbundled. */
function check(
  args: string[],
  from: 'bundle' | 'source',
): { code: number | null; stdout: string; stderr: string; loaded: string[]; cache: string | undefined } {
  const run =
    from === 'bundle'
      ? ['--import', pathToFileURL(tracer).href, '--input-type=module', '-e', RUN_BUNDLE, '--']
      : [builtCli(), 'check'];
  const r = spawnSync(process.execPath, [...run, ...args], { cwd: ROOT, encoding: 'utf8' });
  const lines = r.stderr.split('\n');
  return {
    code: r.status,
    stdout: r.stdout,
    stderr: lines.filter((l) => !l.startsWith('LOADED ') && !l.startsWith('CACHE ')).join('\n'),
    loaded: lines.filter((l) => l.startsWith('LOADED ')).map((l) => l.slice('LOADED '.length)),
    cache: lines.find((l) => l.startsWith('CACHE '))?.slice('CACHE '.length),
  };
}

let meta: Metafile;
beforeAll(async () => {
  meta = await bundleCheck(path.join(ROOT, 'src/cli/check.ts'), BUNDLE);
  // The loader as tsc would compile it (no bundling: it imports only Node built-ins).
  await build({
    entryPoints: [path.join(ROOT, 'src/cli/bundled.ts')],
    outfile: LOADER,
    format: 'esm',
    platform: 'node',
    logLevel: 'silent',
  });
  makeCodeCache(BUNDLE, LOADER);
}, scaledMs(120_000));

describe('rategate check, bundled', () => {
  it('holds the config code and its three packages, nothing of the gateway', () => {
    // What went into the bundle's code (esbuild reads more than it keeps: unused modules shake off).
    const output = Object.values(meta.outputs).find((o) => o.entryPoint !== undefined)!;
    const inputs = Object.entries(output.inputs)
      .filter(([, v]) => v.bytesInOutput > 0)
      .map(([f]) => f);
    const packages = new Set(inputs.flatMap((f) => /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(f)?.[1] ?? []));
    expect([...packages].sort()).toEqual(['ipaddr.js', 'yaml', 'zod']);
    const serving =
      /^src\/(app|pipeline|proxy|limiter|guard|admin|mastodon|observability|fleet|surge|replay)\/|^src\/http\/(?!errors\.ts$)/;
    expect(inputs.filter((f) => serving.test(f))).toEqual([]);
    // zod's locales and JSON Schema conversion are left out (imported as a namespace, so unused parts shake off).
    expect(inputs.filter((f) => /zod\/.*\/locales\/(?!en\.js)|from-json-schema/.test(f))).toEqual([]);
  });

  it('refuses to build if the check path reaches a serving package', async () => {
    const entry = path.join(dir, 'bad.ts');
    writeFileSync(entry, `import pino from 'pino';\nexport const check = () => pino;\n`);
    await expect(bundleCheck(entry, path.join(dir, 'bad.js'))).rejects.toThrow(/check must not load pino/);
  });

  it('loads no module file but its loader when it runs, and uses its code cache', () => {
    const r = check(['config/limits.yaml'], 'bundle');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/sign-up/);
    expect(r.loaded).toEqual([pathToFileURL(LOADER).href]);
    expect(r.cache).toBe('used');
  });

  it(
    'answers as the unbundled command does: tables, errors with their place, exit codes',
    () => {
      const broken = path.join(dir, 'broken.yaml');
      writeFileSync(
        broken,
        'listen: nowhere\nlimits:\n  - name: x\n    match: GETT /a\n    per: ip\n    limit: -1\n    period: 1m\nstroe: {}\n',
      );
      const syntax = path.join(dir, 'syntax.yaml');
      writeFileSync(syntax, 'limits: [\n  - name: x\n');
      const cases = [
        ['config/limits.yaml'],
        ['config/examples/mastodon.yaml'],
        [broken],
        [syntax],
        ['--config', '/nonexistent/limits.yaml'],
        ['a.yaml', 'b.yaml'],
      ];
      for (const args of cases) {
        const bundled = check(args, 'bundle');
        const source = check(args, 'source');
        expect({ code: bundled.code, stdout: bundled.stdout, stderr: bundled.stderr }, args.join(' ')).toEqual({
          code: source.code,
          stdout: source.stdout,
          stderr: source.stderr,
        });
      }
      // The broken table really is reported, each error at its place.
      const r = check([broken], 'bundle');
      expect(r.code).toBe(78);
      expect(r.stderr).toMatch(/listen/);
      expect(r.stderr).toMatch(/limits\[0\]\.limit/);
      expect(r.stderr).toMatch(/stroe.*did you mean "store"/);
      // Thirteen processes one after the other, six through tsx: past 20 s at a load average of 30.
    },
    scaledMs(120_000),
  );
});

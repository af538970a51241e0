/**
 * Issue 40, builds: the git revision a build is made from reaches --version and rategate_build_info.
 * `npm run build` writes dist/build-info.json (scripts/build-info.ts: git's short HEAD, `-dirty` for a
 * changed tree, the REVISION build argument in the image, whose context has no .git); the compiled
 * version module reads it; from the sources it reads HEAD from .git's files.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { buildRevision, shortRevision } from '../../scripts/build-info.js';
import { revisionFromGit } from '../../src/observability/version.js';
import { ROOT, read } from './support.js';

const git = async (cwd: string, ...args: string[]): Promise<string> =>
  (await promisify(execFile)('git', args, { cwd })).stdout.trim();

/** A fresh repository with one commit of one file. */
async function repo(): Promise<string> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-rev-'));
  await git(dir, 'init', '-q', '-b', 'main');
  writeFileSync(path.join(dir, 'a.txt'), 'one\n');
  await git(dir, 'add', 'a.txt');
  await git(dir, '-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'one');
  return dir;
}

describe('the revision a build is made from', () => {
  it("is git's 12-digit HEAD, with -dirty once a tracked file changes (an untracked one does not count)", async () => {
    const dir = await repo();
    const head = await git(dir, 'rev-parse', '--short=12', 'HEAD');
    expect(head).toMatch(/^[0-9a-f]{12}$/);
    writeFileSync(path.join(dir, 'untracked.txt'), 'x');
    expect(buildRevision({}, dir)).toBe(head);
    writeFileSync(path.join(dir, 'a.txt'), 'two\n');
    expect(buildRevision({}, dir)).toBe(`${head}-dirty`);
  });

  it('is the REVISION build argument when given (shortened as git would), else unknown without git', () => {
    const full = 'd3c9cc8e0f1a2b3c4d5e6f708192a3b4c5d6e7f8';
    const noGit = mkdtempSync(path.join(os.tmpdir(), 'rategate-nogit-'));
    expect(buildRevision({ REVISION: full }, noGit)).toBe('d3c9cc8e0f1a');
    expect(buildRevision({ REVISION: 'v0.2.0-rc1' }, noGit)).toBe('v0.2.0-rc1');
    expect(buildRevision({ REVISION: 'unknown' }, noGit)).toBe('unknown');
    expect(buildRevision({}, noGit)).toBe('unknown');
    expect(shortRevision(`${full}-dirty`)).toBe('d3c9cc8e0f1a-dirty');
  });

  it('is read from .git by the sources: a loose ref, packed-refs, a detached HEAD, and this worktree', async () => {
    const dir = await repo();
    const head = await git(dir, 'rev-parse', '--short=12', 'HEAD');
    expect(revisionFromGit(path.join(dir))).toBe(head);
    await git(dir, 'pack-refs', '--all');
    expect(revisionFromGit(dir)).toBe(head);
    await git(dir, 'checkout', '-q', '--detach');
    expect(revisionFromGit(dir)).toBe(head);
    expect(revisionFromGit(path.join(ROOT, 'src', 'observability'))).toBe(
      await git(ROOT, 'rev-parse', '--short=12', 'HEAD'),
    );
    expect(revisionFromGit(mkdtempSync(path.join(os.tmpdir(), 'rategate-nogit-')))).toBeUndefined();
  });

  it("is what the compiled version module reports from the build's dist/build-info.json", async () => {
    // A copy of the build's layout outside any checkout: package.json, dist/build-info.json, dist/observability/version.js.
    const root = mkdtempSync(path.join(os.tmpdir(), 'rategate-dist-'));
    mkdirSync(path.join(root, 'dist', 'observability'), { recursive: true });
    writeFileSync(path.join(root, 'package.json'), JSON.stringify({ name: 'rategate', version: '9.8.7' }));
    const outfile = path.join(root, 'dist', 'observability', 'version.mjs');
    await build({
      entryPoints: [path.join(ROOT, 'src/observability/version.ts')],
      outfile,
      format: 'esm',
      platform: 'node',
      logLevel: 'silent',
    });
    const load = async (tag: string) =>
      (await import(`${pathToFileURL(outfile).href}?${tag}`)) as { versionLine(): string; REVISION: string };
    expect((await load('none')).versionLine()).toBe('rategate 9.8.7 (unknown)');
    writeFileSync(
      path.join(root, 'dist', 'build-info.json'),
      JSON.stringify({ version: '9.8.7', revision: 'feedbeef0123-dirty' }),
    );
    expect((await load('built')).versionLine()).toBe('rategate 9.8.7 (feedbeef0123-dirty)');
  });

  it('is passed to the build in the image, and labels it', () => {
    const dockerfile = read('Dockerfile');
    const buildStage = dockerfile.slice(dockerfile.indexOf(' AS build'), dockerfile.indexOf(' AS runtime'));
    expect(buildStage).toMatch(/^ARG REVISION=unknown$/m);
    expect(buildStage).toMatch(/^RUN REVISION="\$\{REVISION\}" npm run build/m);
    expect((JSON.parse(read('package.json')) as { scripts: { build: string } }).scripts.build).toContain(
      'tsx scripts/build-info.ts',
    );
  });
});

/** @module The suite's build of src/ for spawned processes: one per source state, complete, and run on plain Node. */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { buildCli, sourceFiles } from './built-cli.js';
import { builtCli } from './process.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

describe('the built command line', () => {
  it('is keyed by the state of src/: asked again with the same sources, the same build, untouched', async () => {
    const before = statSync(builtCli()).mtimeMs;
    expect(await buildCli()).toBe(builtCli());
    // Nothing was compiled again: the build's files are the ones the globalSetup wrote.
    expect(statSync(builtCli()).mtimeMs).toBe(before);
  });

  it('holds a module for every module of src/, and the Lua scripts beside theirs', () => {
    const dir = path.dirname(path.dirname(builtCli()));
    const files = sourceFiles();
    expect(files.filter((f) => f.endsWith('.lua')).length).toBeGreaterThan(0);
    for (const f of files) {
      const built = path.join(dir, f.replace(/\.ts$/, '.js'));
      expect(existsSync(built), built).toBe(true);
      if (f.endsWith('.lua')) expect(readFileSync(built, 'utf8')).toBe(readFileSync(path.join(ROOT, 'src', f), 'utf8'));
    }
  });

  it('runs on plain Node and finds the package it belongs to', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [builtCli(), '--version']);
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    // `rategate VERSION (REVISION)`: the version from the package it found, the revision from git.
    expect(stdout.trim()).toMatch(
      new RegExp(`^rategate ${pkg.version.replace(/\./g, '\\.')} \\((?:[0-9a-f]{12}(?:-dirty)?|unknown)\\)$`),
    );
  });
});

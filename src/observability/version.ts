/**
 * @module Which rategate this is, for --version, rategate_build_info and the status page: the package
 * version, from rategate's package.json (the nearest one above this module: one level above src/ and
 * dist/; further up for a copy built elsewhere, as the bench builds into bench/.build/dist), and the git
 * revision it was built from, from the build-info.json `npm run build` writes beside the compiled code
 * (scripts/build-info.ts). Run from the sources (tsx) there is none: the revision is then the checked-out
 * commit, read from .git's files (no process is started; a tree's changes cannot be seen that way),
 * else `unknown`.
 */
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));

function readJson(file: string): Record<string, unknown> | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

function readVersion(): string {
  for (let dir = HERE, up = 0; up < 4; up++, dir = path.dirname(dir)) {
    const pkg = readJson(path.join(dir, '..', 'package.json'));
    if (pkg?.name === 'rategate' && typeof pkg.version === 'string') return pkg.version;
  }
  return 'unknown';
}

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** The git folder of the checkout holding `dir` (a worktree's `.git` is a file naming it), or undefined. */
function gitDirAbove(dir: string): string | undefined {
  for (let d = dir; ; d = path.dirname(d)) {
    const dotGit = path.join(d, '.git');
    try {
      if (statSync(dotGit).isDirectory()) return dotGit;
      const named = /^gitdir:\s*(.+)$/m.exec(readText(dotGit) ?? '')?.[1];
      if (named !== undefined) return path.resolve(d, named);
    } catch {
      // no .git here: look one level further up
    }
    if (path.dirname(d) === d) return undefined;
  }
}

/** HEAD's commit, 12 hex digits, from .git's files: HEAD, the loose ref or packed-refs (a worktree's refs are in its common folder). */
export function revisionFromGit(dir: string): string | undefined {
  const gitDir = gitDirAbove(dir);
  if (gitDir === undefined) return undefined;
  const head = readText(path.join(gitDir, 'HEAD'));
  if (head === undefined) return undefined;
  const ref = /^ref:\s*(\S+)$/.exec(head)?.[1];
  let commit = ref === undefined ? head : undefined;
  if (ref !== undefined) {
    const common = path.resolve(gitDir, readText(path.join(gitDir, 'commondir')) ?? '.');
    commit = readText(path.join(gitDir, ref)) ?? readText(path.join(common, ref));
    commit ??= readText(path.join(common, 'packed-refs'))
      ?.split('\n')
      .find((l) => l.endsWith(` ${ref}`))
      ?.split(' ')[0];
  }
  return commit !== undefined && /^[0-9a-f]{40,64}$/.test(commit) ? commit.slice(0, 12) : undefined;
}

function readRevision(): string {
  const built = readJson(path.join(HERE, '..', 'build-info.json'))?.revision;
  if (typeof built === 'string' && built !== '') return built;
  return revisionFromGit(HERE) ?? 'unknown';
}

export const VERSION: string = readVersion();
export const REVISION: string = readRevision();

/** `rategate 0.2.0 (abc123def456)`: what --version prints. */
export function versionLine(): string {
  return `rategate ${VERSION} (${REVISION})`;
}

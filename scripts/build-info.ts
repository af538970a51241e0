/**
 * Writes dist/build-info.json after tsc (`npm run build`): the package version and the git revision the
 * build was made from, read by src/observability/version.ts for --version and rategate_build_info.
 * The revision: the REVISION variable when set (the Dockerfile's build argument: its context has no .git),
 * else `git rev-parse --short=12 HEAD` with `-dirty` when the tree has changes, else "unknown".
 *
 *   npx tsx scripts/build-info.ts            (run by `npm run build`)
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** A full or short commit shortened to 12 hex digits, as git's short form; anything else as given. */
export function shortRevision(rev: string): string {
  const m = /^([0-9a-f]{12})[0-9a-f]*(-dirty)?$/.exec(rev);
  return m === null ? rev : `${m[1]}${m[2] ?? ''}`;
}

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
}

/** The revision a build in `cwd` is made from (see the header). Untracked files do not make it dirty: a build leaves some. */
export function buildRevision(env: Record<string, string | undefined> = process.env, cwd = process.cwd()): string {
  const given = env.REVISION?.trim();
  if (given && given !== 'unknown') return shortRevision(given);
  try {
    const head = git(cwd, 'rev-parse', '--short=12', 'HEAD');
    return git(cwd, 'status', '--porcelain', '--untracked-files=no') === '' ? head : `${head}-dirty`;
  } catch {
    return 'unknown';
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
  const info = { version, revision: buildRevision() };
  writeFileSync('dist/build-info.json', `${JSON.stringify(info)}\n`);
  console.log(`dist/build-info.json: rategate ${info.version} (${info.revision})`);
}

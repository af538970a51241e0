/**
 * Issue 29 item 12: the command line loads only what a command needs (`--version` and `check` never load
 * the gateway, its HTTP client, Redis or the logger), and `serve` from a folder without the default
 * config says so in one line instead of a stack trace.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../packaging/support.js';
import { builtCli } from '../support/process.js';

/** The build of src/ the suite runs (its modules keep src/'s folders: cli/index.js, app/…). */
const CLI = builtCli();
const BUILT = pathToFileURL(path.dirname(path.dirname(CLI))).href;

/** A module hook that prints the URL of every module loaded after it (node: built-ins aside). */
const tracer = path.join(mkdtempSync(path.join(os.tmpdir(), 'rategate-trace-')), 'trace.mjs');
writeFileSync(
  tracer,
  `import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent(\`export async function load(url, context, next) {
  if (!url.startsWith('node:')) process._rawDebug('LOADED ' + url);
  return next(url, context);
}\`));
`,
);

/** Runs the command line from `cwd`; returns its exit code, output and the modules it loaded. */
function run(args: string[], cwd = ROOT): { code: number | null; stdout: string; stderr: string; loaded: string[] } {
  const r = spawnSync(process.execPath, ['--import', pathToFileURL(tracer).href, CLI, ...args], {
    cwd,
    encoding: 'utf8',
  });
  const lines = r.stderr.split('\n');
  return {
    code: r.status,
    stdout: r.stdout,
    stderr: lines.filter((l) => !l.startsWith('LOADED ')).join('\n'),
    loaded: lines.filter((l) => l.startsWith('LOADED ')).map((l) => l.slice('LOADED '.length)),
  };
}

/** What serving takes, and a command that only reads or prints must not load. */
const GATEWAY = new RegExp(
  `^${BUILT.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/(app|pipeline|proxy|limiter|guard|admin|mastodon|http/listener)(/|\\.js)|/node_modules/(pino|undici|ioredis|prom-client|http-proxy)/`,
);

describe('the command line at start-up', () => {
  it('prints the version without loading the gateway, the config schema or the logger', () => {
    const r = run(['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toMatch(/^rategate \d+\.\d+\.\d+ \([0-9a-f]{12}(-dirty)?\)$/);
    expect(r.loaded.filter((u) => GATEWAY.test(u) || /node_modules\/(zod|yaml)\//.test(u))).toEqual([]);
  });

  it('checks a table without loading the gateway: only the config code, zod and yaml', () => {
    const r = run(['check', 'config/limits.yaml']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/sign-up/);
    expect(r.loaded.filter((u) => GATEWAY.test(u))).toEqual([]);
    // The tracer sees the build's own modules, so the pattern above names files that could be there.
    expect(r.loaded.filter((u) => u.startsWith(`${BUILT}/config/`)).length).toBeGreaterThan(0);
  });

  it('says in one JSON line (level fatal, the file named) that serve found no config/limits.yaml in the folder it runs in, with no stack trace', () => {
    const empty = mkdtempSync(path.join(os.tmpdir(), 'rategate-empty-'));
    const r = run(['serve', '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0'], empty);
    expect(r.code).toBe(78);
    const lines = r.stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(line).toMatchObject({ level: 'fatal', failure: 'config', file: 'config/limits.yaml' });
    expect(line.msg).toMatch(
      /^rategate: cannot read the config file config\/limits\.yaml: no such file \(the default, under .*: give --config FILE or set RATEGATE_CONFIG\)$/,
    );
    expect(r.stdout + r.stderr).not.toMatch(/\n\s+at /);
  });

  it('names a missing --config file the same way, for serve (a JSON line) and check (plain text)', () => {
    const serve = run(['serve', '--config', '/nonexistent/limits.yaml']);
    expect(serve.code).toBe(78);
    expect(JSON.parse(serve.stdout.trim())).toMatchObject({
      level: 'fatal',
      file: '/nonexistent/limits.yaml',
      msg: 'rategate: cannot read the config file /nonexistent/limits.yaml: no such file',
    });
    const check = run(['check', '--config', '/nonexistent/limits.yaml']);
    expect(check.code).toBe(78);
    expect(check.stderr.trim()).toBe('rategate: cannot read the config file /nonexistent/limits.yaml: no such file');
  });

  it("logs a YAML error at start-up with its file, line and column, the person's message kept in msg", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-bad-'));
    const file = path.join(dir, 'limits.yaml');
    writeFileSync(file, 'limits:\n  - name: a\n    limit: [1\n');
    const r = run(['serve', '--config', file, '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0']);
    expect(r.code).toBe(78);
    const line = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as Record<string, unknown>;
    expect(line).toMatchObject({
      level: 'fatal',
      failure: 'config',
      file,
      line: expect.any(Number),
      column: expect.any(Number),
    });
    expect(line.time).toMatch(/Z$/);
    expect(line.msg).toMatch(
      new RegExp(
        `^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: invalid config \\(1 error\\)\\n  - line \\d+, column \\d+: `,
      ),
    );
  });
});

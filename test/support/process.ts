/**
 * @module Spawns the real `rategate` command line for ops tests, and waits on its output. It runs the
 * build of src/ the globalSetup made (built-cli.ts) on plain Node: a start-up in about a second idle,
 * where tsx compiled every module again in each process.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { inject } from 'vitest';
import { eventually } from './eventually.js';

/** The built cli/index.js (the globalSetup's build of the current src/). */
export function builtCli(): string {
  const cli = inject('builtCli');
  if (!cli)
    throw new Error(
      'no built command line: the suite builds it in test/support/global-setup.ts (run through vitest.config.ts)',
    );
  return cli;
}

/** A module of that build, by its path under src/ with .js for .ts: `builtModule('cli/healthcheck.js')`. */
export function builtModule(rel: string): string {
  return path.join(path.dirname(path.dirname(builtCli())), rel);
}

/** The arguments that make `process.execPath` run `rategate ARGS…` (for a test spawning it its own way). */
export function cliArgs(args: readonly string[]): string[] {
  return [builtCli(), ...args];
}

export interface GatewayProcess {
  readonly child: ChildProcess;
  readonly url: string;
  readonly adminUrl: string;
  /** Everything written to stdout and stderr so far. */
  output(): string;
  readonly exited: Promise<number | null>;
}

/**
 * Runs `rategate serve` with both listeners on port 0 (the admin one on `adminHost`) and learns the
 * ports the process bound from its start-up lines (written at info whatever the log level, short of
 * `silent`); resolves once the admin listener answers. No port is picked before the process binds it,
 * so no other process can take it in between.
 */
export async function spawnServe(
  args: string[],
  env: Record<string, string> = {},
  // A readiness wait on an idle machine, stretched by the measured slowdown (speed.ts): a start takes ~1 s idle.
  startMs = 20_000,
  opts: { adminHost?: string } = {},
): Promise<GatewayProcess> {
  if (env.RATEGATE_LOG_LEVEL === 'silent')
    throw new Error('spawnServe reads the start-up line: a silent log would hide the bound addresses');
  const listen = ['--listen', '127.0.0.1:0', '--admin-listen', `${opts.adminHost ?? '127.0.0.1'}:0`];
  const child = spawn(process.execPath, cliArgs(['serve', ...listen, ...args]), {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const ready = async (): Promise<Bound | 'exited' | false> => {
    if (child.exitCode !== null) return 'exited';
    const at = boundAddresses(out);
    return at !== undefined && (await fetch(`${at.adminUrl}/healthz`).catch(() => null))?.ok === true ? at : false;
  };
  const state = await eventually(ready, {
    what: 'the start-up line and admin listener of `rategate serve`',
    withinMs: startMs,
  }).catch((err: Error) => {
    throw new Error(`gateway did not start (${err.message}): ${withFatalMessages(out)}`);
  });
  if (state === 'exited' || state === false) throw new Error(`gateway did not start: ${withFatalMessages(out)}`);
  return { child, url: state.url, adminUrl: state.adminUrl, output: () => out, exited };
}

/**
 * The output, then each fatal JSON line's `msg` as a person reads it (serve logs a start-up failure as
 * one JSON line: its quotes are escaped there), so a test can match the sentence itself.
 */
function withFatalMessages(out: string): string {
  const messages: string[] = [];
  for (const line of out.split('\n')) {
    if (!line.startsWith('{') || !line.includes('"fatal"')) continue;
    try {
      const msg = (JSON.parse(line) as { msg?: unknown }).msg;
      if (typeof msg === 'string') messages.push(msg);
    } catch {
      // not a log line
    }
  }
  return messages.length === 0 ? out : `${out}\n${messages.join('\n')}`;
}

interface Bound {
  readonly url: string;
  readonly adminUrl: string;
}

/**
 * The bound addresses from the JSON start-up lines: `listen` and `admin` of "rategate listening on …";
 * with --workers, `admin` is the primary's own line ("rategate primary: …") and `listen` a worker's.
 * An admin on every address (0.0.0.0, ::) is reached over loopback.
 */
function boundAddresses(out: string): Bound | undefined {
  let url: string | undefined;
  let adminUrl: string | undefined;
  // Whole lines only: the last one may still be arriving.
  for (const line of out.split('\n').slice(0, -1)) {
    if (!line.startsWith('{') || !line.includes('"msg":"rategate ')) continue;
    const rec = JSON.parse(line) as { listen?: string; admin?: string };
    if (rec.listen) url ??= rec.listen;
    if (rec.admin) adminUrl ??= rec.admin.replace(/^http:\/\/(0\.0\.0\.0|\[::\])/, 'http://127.0.0.1');
  }
  return url !== undefined && adminUrl !== undefined ? { url, adminUrl } : undefined;
}

/** Runs `rategate ARGS…` to completion. */
export function runCli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, cliArgs(args), {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** `eventually` for a boolean condition (kept for the tests written against it). */
export async function waitFor(cond: () => boolean | Promise<boolean>, ms: number, what = 'condition'): Promise<void> {
  await eventually(cond, { what, withinMs: ms });
}

export function stop(p: GatewayProcess): Promise<number | null> {
  if (p.child.exitCode === null) p.child.kill('SIGTERM');
  return p.exited;
}

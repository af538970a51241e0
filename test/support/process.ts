/** @module Spawns the real `rategate` command line (through tsx) for ops tests, and waits on its output. */
import { spawn, type ChildProcess } from 'node:child_process';
import { eventually } from './eventually.js';
import { freePort } from './servers.js';

export interface GatewayProcess {
  readonly child: ChildProcess;
  readonly url: string;
  readonly adminUrl: string;
  /** Everything written to stdout and stderr so far. */
  output(): string;
  readonly exited: Promise<number | null>;
}

/**
 * Runs `rategate serve` on free loopback ports (the admin listener on `adminHost`); resolves once the
 * admin listener answers. The ports are chosen here, not by listening on port 0: the process would
 * report its choice only in its start-up line, which a test may silence (`RATEGATE_LOG_LEVEL`).
 */
export async function spawnServe(
  args: string[],
  env: Record<string, string> = {},
  // A readiness wait, not a speed claim: a busy shared machine (load 25+) took over 20 s to start tsx.
  startMs = 60_000,
  opts: { adminHost?: string } = {},
): Promise<GatewayProcess> {
  const port = await freePort();
  const adminPort = await freePort();
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'src/cli/index.ts',
      'serve',
      '--listen',
      `127.0.0.1:${port}`,
      '--admin-listen',
      `${opts.adminHost ?? '127.0.0.1'}:${adminPort}`,
      ...args,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } },
  );
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  const state = await eventually(
    async () => (child.exitCode !== null ? 'exited' : (await fetch(`${adminUrl}/healthz`).catch(() => null))?.ok === true ? 'up' : false),
    { what: 'the admin listener of `rategate serve`', withinMs: startMs },
  ).catch((err: Error) => {
    throw new Error(`gateway did not start (${err.message}): ${out}`);
  });
  if (state === 'exited') throw new Error(`gateway did not start: ${out}`);
  return { child, url: `http://127.0.0.1:${port}`, adminUrl, output: () => out, exited };
}

/** Runs `rategate ARGS…` to completion. */
export function runCli(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/index.ts', ...args], {
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

/** @module Spawns the real `rategate` command line (through tsx) for ops tests, and waits on its output. */
import { spawn, type ChildProcess } from 'node:child_process';
import { freePort } from './servers.js';

export interface GatewayProcess {
  readonly child: ChildProcess;
  readonly url: string;
  readonly adminUrl: string;
  /** Everything written to stdout and stderr so far. */
  output(): string;
  readonly exited: Promise<number | null>;
}

/** Runs `rategate serve` on free loopback ports; resolves once the admin listener answers. */
export async function spawnServe(args: string[], env: Record<string, string> = {}, startMs = 20_000): Promise<GatewayProcess> {
  const port = await freePort();
  const adminPort = await freePort();
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli/index.ts', 'serve', '--listen', `127.0.0.1:${port}`, '--admin-listen', `127.0.0.1:${adminPort}`, ...args],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } },
  );
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  const started = Date.now();
  for (;;) {
    try {
      await fetch(`${adminUrl}/healthz`);
      break;
    } catch {
      if (Date.now() - started > startMs || child.exitCode !== null) throw new Error(`gateway did not start: ${out}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
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

export async function waitFor(cond: () => boolean | Promise<boolean>, ms: number, what = 'condition'): Promise<void> {
  const started = Date.now();
  while (!(await cond())) {
    if (Date.now() - started > ms) throw new Error(`${what} not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export function stop(p: GatewayProcess): Promise<number | null> {
  if (p.child.exitCode === null) p.child.kill('SIGTERM');
  return p.exited;
}

/**
 * @module Starts a Ruby Rack app under Debian's `puma` on a free loopback port (one thread), and says
 * whether this machine has puma at all: the differential tests and the header-spelling tests run the
 * real server, since what reaches an app is what Puma builds its env from.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { freePort } from './servers.js';
import { scaledMs } from './speed.js';

/** A Rack app that answers with the Rack env Puma built (test/support/puma-env/config.ru). */
export const ENV_ECHO_DIR = fileURLToPath(new URL('./puma-env/', import.meta.url));

export interface PumaApp {
  url: string;
  stop(): Promise<void>;
}

/** Null when `puma` runs; otherwise why not. */
export function whyNoPuma(): string | null {
  const puma = spawnSync('puma', ['--version'], { encoding: 'utf8', timeout: 30_000 });
  return puma.error || puma.status !== 0 ? 'puma not found (Debian package puma)' : null;
}

/** Runs `config.ru` of `appDir` under puma with `env` added; resolves once puma listens. */
export async function startPuma(appDir: string, env: Record<string, string> = {}): Promise<PumaApp> {
  const port = await freePort();
  const child: ChildProcess = spawn(
    'puma',
    ['-b', `tcp://127.0.0.1:${port}`, '-t', '1:1', '-e', 'production', 'config.ru'],
    {
      cwd: appDir,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const onData = () => {
      if (output.includes('Listening on')) done(null);
    };
    const onExit = () => done(new Error(`puma exited before listening:\n${output}`));
    // 30 s idle, stretched by the machine's slowdown (speed.ts).
    const withinMs = scaledMs(30_000);
    const timer = setTimeout(() => done(new Error(`puma did not listen within ${withinMs} ms:\n${output}`)), withinMs);
    const done = (err: Error | null) => {
      clearTimeout(timer);
      child.stdout!.off('data', onData);
      child.off('exit', onExit);
      if (err) reject(err);
      else resolve();
    };
    child.stdout!.on('data', onData);
    child.once('exit', onExit);
  });
  return {
    url: `http://127.0.0.1:${port}`,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

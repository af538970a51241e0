/**
 * @module Starts the Ruby app of test/differential/rack-app (real Rack::Attack running Mastodon's
 * throttles) under puma on loopback, and says whether this machine can run it at all.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { send } from '../support/http.js';
import { freePort } from '../support/servers.js';

export const APP_DIR = fileURLToPath(new URL('./rack-app/', import.meta.url));

/** The libraries the app loads, as Debian packages them (`.ci/run` installs them). */
const REQUIRES = [
  'rack',
  'rack/attack',
  'action_dispatch',
  'action_dispatch/middleware/remote_ip',
  'warden',
  'active_support',
  'doorkeeper/oauth/token',
  'doorkeeper/grape/authorization_decorator',
  'active_support/cache',
];

/** Null when ruby, puma and every library load; otherwise why not. */
export function whyUnavailable(): string | null {
  const ruby = spawnSync('ruby', ['-e', REQUIRES.map((r) => `require ${JSON.stringify(r)}`).join('; ')], { encoding: 'utf8', timeout: 30_000 });
  if (ruby.error) return `ruby not found (${ruby.error.message})`;
  if (ruby.status !== 0)
    return `a Ruby library is missing (need Debian's ruby-rack-attack ruby-rack ruby-actionpack ruby-doorkeeper ruby-warden): ${ruby.stderr.trim().split('\n')[0]}`;
  const puma = spawnSync('puma', ['--version'], { encoding: 'utf8', timeout: 30_000 });
  if (puma.error || puma.status !== 0) return 'puma not found (Debian package puma)';
  return null;
}

export interface RackApp {
  url: string;
  stop(): Promise<void>;
}

export async function startRackApp(env: {
  limits: Record<string, number>;
  tokens: Record<string, string | null>;
  blocked: string[];
  nowSec: number;
}): Promise<RackApp> {
  const port = await freePort();
  const child: ChildProcess = spawn('puma', ['-b', `tcp://127.0.0.1:${port}`, '-t', '1:1', '-e', 'production', 'config.ru'], {
    cwd: APP_DIR,
    env: {
      ...process.env,
      RA_LIMITS: JSON.stringify(env.limits),
      RA_TOKENS: JSON.stringify(env.tokens),
      RA_BLOCKED: JSON.stringify(env.blocked),
      RA_NOW: String(env.nowSec),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const onData = () => {
      if (output.includes('Listening on')) done(null);
    };
    const onExit = () => done(new Error(`puma exited before listening:\n${output}`));
    const timer = setTimeout(() => done(new Error(`puma did not listen within 30 s:\n${output}`)), 30_000);
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
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** The session cookie the app issues when Warden signs `user` in (or, `pending`, when `user` waits for a two-factor code). */
export async function sessionCookie(app: RackApp, user: string, name: string, pending = false): Promise<string> {
  const endpoint = pending ? '/__pending' : '/__login';
  const a = await send(app.url, { method: 'POST', path: `${endpoint}?user=${encodeURIComponent(user)}` });
  const set = ([] as string[]).concat(a.headers['set-cookie'] ?? []);
  const m = set.map((c) => new RegExp(`^${name}=([^;]*)`).exec(c)).find((x) => x !== null);
  if (!m) throw new Error(`no ${name} cookie from ${endpoint} (status ${a.status})`);
  return m[1]!;
}

export async function setClock(app: RackApp, nowSec: number): Promise<void> {
  const a = await send(app.url, { method: 'POST', path: `/__clock?t=${nowSec}` });
  if (a.status !== 204) throw new Error(`clock not set: ${a.status}`);
}

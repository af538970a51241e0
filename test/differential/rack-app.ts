/**
 * @module Starts the Ruby app of test/differential/rack-app (real Rack::Attack running Mastodon's
 * throttles) under puma on loopback, and says whether this machine can run it at all.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { send } from '../support/http.js';
import { startPuma, whyNoPuma, type PumaApp } from '../support/puma.js';

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
  const ruby = spawnSync('ruby', ['-e', REQUIRES.map((r) => `require ${JSON.stringify(r)}`).join('; ')], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  if (ruby.error) return `ruby not found (${ruby.error.message})`;
  if (ruby.status !== 0)
    return `a Ruby library is missing (need Debian's ruby-rack-attack ruby-rack ruby-actionpack ruby-doorkeeper ruby-warden): ${ruby.stderr.trim().split('\n')[0]}`;
  return whyNoPuma();
}

export type RackApp = PumaApp;

export function startRackApp(env: {
  limits: Record<string, number>;
  tokens: Record<string, string | null>;
  blocked: string[];
  nowSec: number;
}): Promise<RackApp> {
  return startPuma(APP_DIR, {
    RA_LIMITS: JSON.stringify(env.limits),
    RA_TOKENS: JSON.stringify(env.tokens),
    RA_BLOCKED: JSON.stringify(env.blocked),
    RA_NOW: String(env.nowSec),
  });
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

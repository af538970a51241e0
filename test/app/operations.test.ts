/**
 * What an operator relies on when something goes wrong (SPEC §6): counters at 0 from the start, the
 * reload state and build info in /metrics, reload messages that say what actually happened, and a
 * readiness that means "can serve" with the store's state in its body.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../src/app/start.js';
import { send } from '../support/http.js';
import { SEED_TABLE, gatewayFixture } from '../support/gateway.js';

const VERSION = (await import('../../package.json', { with: { type: 'json' } })).default.version;
/** Run from the sources, the gateway names the checked-out commit: asked of git itself here. */
const REVISION = (await promisify(execFile)('git', ['rev-parse', '--short=12', 'HEAD'])).stdout.trim();

const fx = gatewayFixture<RunningGateway>({ graceMs: 500 });

/** A gateway on free ports whose log lines are kept (parsed) for the test to read. */
async function start(
  yaml: string,
  overrides: { store?: string } = {},
): Promise<{ file: string; lines: Array<Record<string, unknown>> }> {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'rategate-ops-')), 'limits.yaml');
  writeFileSync(file, yaml);
  const lines: Array<Record<string, unknown>> = [];
  fx.gw = await startGateway({
    configPath: file,
    overrides: { listen: '127.0.0.1:0', adminListen: '127.0.0.1:0', upstream: fx.upstream.url, ...overrides },
    logger: pino(
      { level: 'info' },
      { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) },
    ),
    defaultMetrics: false,
    watch: false,
  });
  return { file, lines };
}

const metrics = async (): Promise<string> => (await fetch(`${fx.gw!.adminUrl}/metrics`)).text();
const QUIET = 'log: { requests: debug }\n';

describe('metrics an alert can rely on', () => {
  it('shows every known counter at 0 from the start, a successful load, the build, and the store up', async () => {
    await start(QUIET + SEED_TABLE);
    const m = await metrics();
    expect(m).toContain('rategate_config_reloads_total{result="success"} 0');
    expect(m).toContain('rategate_config_reloads_total{result="error"} 0');
    for (const reason of [
      'timeout',
      'connection',
      'readonly',
      'clusterdown',
      'unavailable',
      'script',
      'circuit_open',
    ]) {
      expect(m).toContain(`rategate_store_errors_total{reason="${reason}"} 0`);
    }
    for (const reason of ['unreachable', 'reset', 'timeout', 'bad_request']) {
      expect(m).toContain(`rategate_upstream_errors_total{reason="${reason}"} 0`);
    }
    expect(m).toContain('rategate_config_last_reload_successful 1');
    const ts = Number(/^rategate_config_last_reload_success_timestamp_seconds (\S+)$/m.exec(m)?.[1]);
    expect(Math.abs(ts - Date.now() / 1000)).toBeLessThan(60);
    expect(m).toContain(`rategate_build_info{version="${VERSION}",revision="${REVISION}",node="${process.version}"} 1`);
    expect(m).toContain('rategate_store_up 1');
    expect(m).toContain('rategate_store_fallback_active 0');
  });

  it('turns last_reload_successful to 0 after a broken edit, and back to 1 after a good one', async () => {
    const { file } = await start(QUIET + SEED_TABLE);
    writeFileSync(file, QUIET + 'limits:\n  - { name: broken, match: nope, per: ip, limit: -1, period: 5x }\n');
    expect(await fx.gw!.reload()).toBe(false);
    let m = await metrics();
    expect(m).toContain('rategate_config_last_reload_successful 0');
    expect(m).toContain('rategate_config_reloads_total{result="error"} 1');
    const failedAt = Number(/^rategate_config_last_reload_success_timestamp_seconds (\S+)$/m.exec(m)?.[1]);
    // The timestamp has millisecond resolution: wait only until the clock has passed the failed one.
    while (Date.now() <= failedAt * 1000) await new Promise((r) => setImmediate(r));
    writeFileSync(file, QUIET + SEED_TABLE);
    expect(await fx.gw!.reload()).toBe(true);
    m = await metrics();
    expect(m).toContain('rategate_config_last_reload_successful 1');
    expect(m).toContain('rategate_config_reloads_total{result="success"} 1');
    expect(Number(/^rategate_config_last_reload_success_timestamp_seconds (\S+)$/m.exec(m)?.[1])).toBeGreaterThan(
      failedAt,
    );
  });
});

describe('reload messages', () => {
  const messages = (lines: Array<Record<string, unknown>>) => lines.map((l) => String(l.msg));

  it('say admin.token and store.onError are in force at once, and they are', async () => {
    const { file, lines } = await start(QUIET + SEED_TABLE);
    writeFileSync(file, `${QUIET}admin: { token: t0p-s3cret }\nstore: { onError: deny }\n${SEED_TABLE}`);
    expect(await fx.gw!.reload()).toBe(true);
    const after = messages(lines).filter((m) => m.startsWith('config reloaded'));
    expect(after).toEqual(['config reloaded: 5 rules; in force now: admin.token, store.onError']);
    expect(lines.some((l) => JSON.stringify(l).includes('restart'))).toBe(false);
    expect(JSON.stringify(lines)).not.toContain('t0p-s3cret');
    // In force: the buckets API now wants the token.
    expect((await fetch(`${fx.gw!.adminUrl}/admin/buckets?rule=ip-access&key=1.2.3.4`)).status).toBe(401);
    expect(fx.gw!.snapshot().config.store.onError).toBe('deny');
  });

  it('name the changes that wait for a restart, apart from those in force', async () => {
    const { file, lines } = await start(QUIET + SEED_TABLE);
    writeFileSync(
      file,
      `${QUIET}store: { prefix: other, onError: allow }\nserver: { maxConnections: 5, maxBodySize: 1MB }\n${SEED_TABLE.replace('limit: 5\n', 'limit: 6\n')}`,
    );
    expect(await fx.gw!.reload()).toBe(true);
    const after = lines.filter((l) => String(l.msg).startsWith('config reloaded'));
    expect(after.map((l) => l.msg)).toEqual([
      'config reloaded: 5 rules; in force now: store.onError, server.maxBodySize, limits',
      'config reloaded, but these changes apply only at the next restart (the running values stay until then): store.prefix, server.maxConnections',
    ]);
    expect(after[1]).toMatchObject({ level: 40, atRestart: ['store.prefix', 'server.maxConnections'] });
  });

  it('name each rule the edit changed, old → new, and each rule added or removed', async () => {
    const { file, lines } = await start(QUIET + SEED_TABLE);
    const edited = SEED_TABLE.replace('limit: 5\n    period: 30m', 'limit: 6\n    period: 1h')
      .replace(/ {2}- name: deletion[\s\S]*$/, '')
      .concat('  - { name: search, match: GET /api/v2/search, per: ip, limit: 10, period: 1m }\n')
      .concat(
        'bans:\n  - { name: login-failures, match: POST /auth/sign_in, per: ip, on: { status: [401] }, limit: 10, period: 10m, ban: 1h }\n',
      );
    writeFileSync(file, QUIET + edited);
    expect(await fx.gw!.reload()).toBe(true);
    const ruleLines = lines.filter((l) => l.rule !== undefined && l.change !== undefined);
    expect(ruleLines.map((l) => l.msg)).toEqual([
      'rule sign-up changed: limit 5 → 6, period 30m → 1h',
      'rule search added: match GET /api/v2/search, per ip, limit 10, period 1m, algorithm fixed-window, cost 1, shadow false',
      'rule deletion removed',
      expect.stringMatching(
        /^ban login-failures added: match POST \/auth\/sign_in, per ip, .*limit 10, period 10m, ban 1h/,
      ),
    ]);
    expect(ruleLines[0]).toMatchObject({ level: 30, section: 'limits', rule: 'sign-up', change: 'changed' });
    // Unchanged rules are not named.
    expect(JSON.stringify(ruleLines)).not.toContain('ip-access');
  });

  it('say so when nothing changed', async () => {
    const { file, lines } = await start(QUIET + SEED_TABLE);
    writeFileSync(file, `# a comment\n${QUIET}${SEED_TABLE}`);
    expect(await fx.gw!.reload()).toBe(true);
    expect(messages(lines)).toContain('config reloaded: 5 rules; nothing changed');
  });
});

describe('readiness', () => {
  it('stays ready with onError: deny and the store down, and reports the store in the body and in metrics', async () => {
    await start(`${QUIET}store: { onError: deny }\n${SEED_TABLE}`, { store: 'redis://127.0.0.1:9' });
    const r = await fetch(`${fx.gw!.adminUrl}/readyz`);
    const body = (await r.json()) as Record<string, unknown>;
    expect(r.status).toBe(200);
    expect(body).toMatchObject({ status: 'ready', store: { kind: 'redis', reachable: false, onError: 'deny' } });
    expect(body.checks).not.toHaveProperty('store');
    // It can serve: a route no rule matches is forwarded, a limited one gets 503.
    expect((await send(fx.gw!.url, { path: '/health' })).status).toBe(200);
    expect((await send(fx.gw!.url, { path: '/api/v1/statuses/1' })).status).toBe(503);
    expect(await metrics()).toContain('rategate_store_up 0');
  });

  it('fails with the store down when store.failReadiness asks for it', async () => {
    await start(`${QUIET}store: { onError: local, failReadiness: true }\n${SEED_TABLE}`, {
      store: 'redis://127.0.0.1:9',
    });
    const r = await fetch(`${fx.gw!.adminUrl}/readyz`);
    expect(r.status).toBe(503);
    expect(await r.json()).toMatchObject({
      status: 'not ready',
      checks: { store: false },
      store: { reachable: false },
    });
  });
});

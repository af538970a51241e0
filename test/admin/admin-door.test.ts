/**
 * Issue 11, the open door: an admin listener off loopback refuses the buckets API until a token is set
 * (from admin.token, RATEGATE_ADMIN_TOKEN or admin.tokenFile), while metrics and probes stay open; and a
 * malformed admin target is a 4xx, never a 500.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../src/app/start.js';
import { ConfigError, type ConfigOverrides } from '../../src/config/index.js';
import { isLoopbackListen } from '../../src/admin/token.js';
import { send } from '../support/http.js';
import { spawnServe, stop } from '../support/process.js';
import { SEED_TABLE, gatewayFixture, limitsFile } from '../support/gateway.js';
import { scaledMs } from '../support/speed.js';

const fx = gatewayFixture<RunningGateway>({ graceMs: 500 });

const configFile = (extra = ''): string => limitsFile(`${SEED_TABLE}\n${extra}\n`);

interface Logged {
  level: number;
  msg: string;
}

/** A gateway whose admin listener binds all interfaces (reached over 127.0.0.1 all the same). */
async function start(
  extra = '',
  overrides: ConfigOverrides = {},
  adminListen = '0.0.0.0:0',
): Promise<{ gw: RunningGateway; logs: Logged[] }> {
  const logs: Logged[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line) as Logged) });
  fx.gw = await startGateway({
    configPath: configFile(extra),
    overrides: { listen: '127.0.0.1:0', adminListen, upstream: fx.upstream.url, ...overrides },
    logger,
    defaultMetrics: false,
    watch: false,
  });
  return { gw: fx.gw, logs };
}

/** The admin URL as reached over loopback, whatever address the listener bound. */
function adminOn(g: RunningGateway): string {
  return `http://127.0.0.1:${new URL(g.adminUrl).port}`;
}

const BUCKET = '/admin/buckets?rule=sign-up&key=192.0.2.9';

describe('an admin listener that is not loopback-only', () => {
  it('refuses /admin/buckets with 403 when no token is set, warns at start, and keeps metrics and probes open', async () => {
    const { gw: g, logs } = await start();
    const admin = adminOn(g);
    const get = await fetch(admin + BUCKET);
    expect(get.status).toBe(403);
    expect(((await get.json()) as { error: string }).error).toMatch(/RATEGATE_ADMIN_TOKEN/);
    expect((await fetch(admin + BUCKET, { method: 'DELETE' })).status).toBe(403);
    expect((await fetch(`${admin}/metrics`)).status).toBe(200);
    expect((await fetch(`${admin}/healthz`)).status).toBe(200);
    expect([200, 503]).toContain((await fetch(`${admin}/readyz`)).status);
    expect(logs.some((l) => l.level === 40 && /admin/.test(l.msg) && /token/.test(l.msg))).toBe(true);
  });

  it('accepts the right bearer token from the environment override and no other', async () => {
    const { gw: g, logs } = await start('', { adminToken: 'env-s3cret' });
    const admin = adminOn(g);
    expect((await fetch(admin + BUCKET)).status).toBe(401);
    expect((await fetch(admin + BUCKET, { headers: { Authorization: 'Bearer env-s3cre' } })).status).toBe(401);
    expect((await fetch(admin + BUCKET, { headers: { Authorization: 'Bearer env-s3cret2' } })).status).toBe(401);
    expect((await fetch(admin + BUCKET, { headers: { Authorization: 'Basic env-s3cret' } })).status).toBe(401);
    expect((await fetch(admin + BUCKET, { headers: { Authorization: 'Bearer env-s3cret' } })).status).toBe(200);
    expect(logs.some((l) => l.level === 40 && /admin/.test(l.msg))).toBe(false);
  });

  it('reads the token from admin.tokenFile, trimmed, and again on reload', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-token-'));
    const tokenPath = path.join(dir, 'token');
    writeFileSync(tokenPath, '  file-s3cret\n');
    const { gw: g } = await start(`admin: { tokenFile: ${JSON.stringify(tokenPath)} }`);
    const admin = adminOn(g);
    expect((await fetch(admin + BUCKET)).status).toBe(401);
    expect((await fetch(admin + BUCKET, { headers: { Authorization: 'Bearer file-s3cret' } })).status).toBe(200);
    writeFileSync(tokenPath, 'rotated\n');
    expect(await g.reload()).toBe(true);
    expect((await fetch(admin + BUCKET, { headers: { Authorization: 'Bearer file-s3cret' } })).status).toBe(401);
    expect((await fetch(admin + BUCKET, { headers: { Authorization: 'Bearer rotated' } })).status).toBe(200);
  });

  it('refuses to start with a clear config error when admin.tokenFile cannot be read or is empty', async () => {
    const missing = path.join(os.tmpdir(), 'rategate-no-such-token-file');
    await expect(start(`admin: { tokenFile: ${JSON.stringify(missing)} }`)).rejects.toThrow(
      /admin\.tokenFile.*no such file/,
    );
    const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-token-'));
    writeFileSync(path.join(dir, 'empty'), ' \n');
    const err = await start(`admin: { tokenFile: ${JSON.stringify(path.join(dir, 'empty'))} }`).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect(String((err as Error).message)).toMatch(/admin\.tokenFile.*empty/);
  });

  it('refuses a config that sets the token in two places, and lets RATEGATE_ADMIN_TOKEN replace admin.token', async () => {
    await expect(start('admin: { token: a, tokenFile: /etc/hostname }')).rejects.toThrow(
      /admin\.tokenFile: set either/,
    );
    await expect(start('admin: { tokenFile: /etc/hostname }', { adminToken: 'b' })).rejects.toThrow(
      /admin\.tokenFile: set either/,
    );
    const { gw: g } = await start('admin: { token: from-file }', { adminToken: 'from-env' });
    expect((await fetch(adminOn(g) + BUCKET, { headers: { Authorization: 'Bearer from-file' } })).status).toBe(401);
    expect((await fetch(adminOn(g) + BUCKET, { headers: { Authorization: 'Bearer from-env' } })).status).toBe(200);
  });
});

describe('a loopback-only admin listener', () => {
  it('serves /admin/buckets without a token, as before', async () => {
    const { gw: g, logs } = await start('', {}, '127.0.0.1:0');
    expect((await fetch(g.adminUrl + BUCKET)).status).toBe(200);
    expect(logs.some((l) => l.level === 40 && /admin/.test(l.msg))).toBe(false);
  });

  it('answers a malformed target with a 4xx, never 500 Invalid URL', async () => {
    const { gw: g } = await start('', {}, '127.0.0.1:0');
    for (const target of ['//', '//admin/buckets', '*', 'http://x/metrics', '/%', '/admin/buckets?%zz']) {
      const a = await send(g.adminUrl, { path: target });
      expect(a.status, target).toBeGreaterThanOrEqual(400);
      expect(a.status, target).toBeLessThan(500);
    }
  });

  it('knows which listen addresses are loopback-only', () => {
    for (const l of ['127.0.0.1:9464', '127.9.9.9:1', '[::1]:9464', 'localhost:9464'])
      expect(isLoopbackListen(l), l).toBe(true);
    for (const l of ['0.0.0.0:9464', '[::]:9464', '10.0.0.1:9464', ':9464', 'example.org:9464'])
      expect(isLoopbackListen(l), l).toBe(false);
  });
});

describe('RATEGATE_ADMIN_TOKEN through the command line', () => {
  it(
    'protects the buckets API of a served gateway',
    async () => {
      // An admin listener on every address: the token, not loopback, is what guards it.
      const gw = await spawnServe(
        ['--config', configFile(), '--upstream', fx.upstream.url],
        { RATEGATE_ADMIN_TOKEN: 'cli-s3cret\n', RATEGATE_LOG_LEVEL: 'warn' },
        20_000,
        {
          adminHost: '0.0.0.0',
        },
      );
      try {
        expect((await fetch(gw.adminUrl + BUCKET)).status).toBe(401);
        expect((await fetch(gw.adminUrl + BUCKET, { headers: { Authorization: 'Bearer cli-s3cret' } })).status).toBe(
          200,
        );
      } finally {
        await stop(gw);
      }
    },
    scaledMs(20_000),
  );
});

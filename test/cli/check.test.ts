/** `rategate check` is exactly as strict as `serve`, and `rategate --version` says which rategate this is. */
import { describe, expect, it } from 'vitest';
import { send } from '../support/http.js';
import { startTestGateway, SEED_TABLE, upstreamFixture, limitsFile } from '../support/gateway.js';
import { runCli, spawnServe } from '../support/process.js';

const VERSION = (await import('../../package.json', { with: { type: 'json' } })).default.version;

const upstream = upstreamFixture();

describe('rategate check', () => {
  it('takes the file as an argument too, and checks the shipped Mastodon example clean', async () => {
    const ok = await runCli(['check', 'config/examples/mastodon.yaml']);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain('password-resets-email');
    const bad = await runCli(['check', limitsFile('limits:\n  - { name: api, match: GETT /api/*, per: ip, limit: 10, period: 1m }\n')]);
    expect(bad.code).toBe(1);
    expect((await runCli(['check', 'a.yaml', 'b.yaml'])).code).toBe(1);
    expect((await runCli(['check', '--config', 'a.yaml', 'b.yaml'])).code).toBe(1);
  });

  it('refuses a rule for a method that does not exist, as serve does', async () => {
    const file = limitsFile('limits:\n  - { name: api, match: GETT /api/*, per: ip, limit: 10, period: 1m }\n');
    const message = 'limits[0].match: unknown method "GETT" (did you mean "GET"? a custom method must be listed in methods.custom)';
    const check = await runCli(['check', '--config', file]);
    expect(check.code).toBe(1);
    expect(check.stderr).toContain(message);
    await expect(spawnServe(['--config', file])).rejects.toThrow(message);
  });

  it('refuses an empty file with a clear message', async () => {
    const check = await runCli(['check', '--config', limitsFile('')]);
    expect(check.code).toBe(1);
    expect(check.stderr).toContain('(top level): the file is empty (write the limit table; for a gateway with no limits, say so: "limits: []")');
  });

  it('applies the RATEGATE_* overrides serve applies: a bad RATEGATE_STORE fails it', async () => {
    const file = limitsFile(SEED_TABLE);
    expect((await runCli(['check', '--config', file])).code).toBe(0);
    const bad = await runCli(['check', '--config', file], { RATEGATE_STORE: 'mongodb://db:27017' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('store.url: invalid store "mongodb://db:27017"');
    expect(bad.stderr).toContain('(set by an override)');
    expect((await runCli(['check', '--config', file], { RATEGATE_LOG_LEVEL: 'loud' })).code).toBe(1);
  });

  it('accepts a custom method listed in methods.custom, and the rule then limits it', async () => {
    const table = 'methods: { custom: [PURGE] }\nlimits:\n  - { name: purge, match: PURGE /cache/*, per: ip, limit: 1, period: 1h }\n';
    expect((await runCli(['check', '--config', limitsFile(table)])).code).toBe(0);
    const gw = await startTestGateway(table, { upstream: upstream.url });
    try {
      expect((await send(gw.url, { method: 'PURGE', path: '/cache/a' })).status).toBe(200);
      expect((await send(gw.url, { method: 'PURGE', path: '/cache/a' })).status).toBe(429);
    } finally {
      await gw.shutdown(500);
    }
  });
});

describe('rategate --version', () => {
  it('prints the package version, as -v does', async () => {
    for (const flag of ['--version', '-v']) {
      const r = await runCli([flag]);
      expect(r.code).toBe(0);
      expect(r.stdout.trim()).toBe(VERSION);
    }
  });
});

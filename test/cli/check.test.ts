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
    const bad = await runCli([
      'check',
      limitsFile('limits:\n  - { name: api, match: GETT /api/*, per: ip, limit: 10, period: 1m }\n'),
    ]);
    // sysexits: an invalid table is EX_CONFIG, two files a usage error.
    expect(bad.code).toBe(78);
    expect((await runCli(['check', 'a.yaml', 'b.yaml'])).code).toBe(64);
    expect((await runCli(['check', '--config', 'a.yaml', 'b.yaml'])).code).toBe(64);
  });

  it('warns, still exiting 0, about a pattern Rails also routes with a format suffix (issue 38, finding 3)', async () => {
    const table = `limits:
  - { name: inbox, match: [POST /inbox, POST /users/:name/inbox(.:format), POST /actor/inbox], per: ip, limit: 3, period: 1m }
  - { name: status, match: DELETE /statuses/:id, per: ip, limit: 3, period: 1m }
  - { name: api, match: [POST /api/v1/accounts, /api/*, /media_proxy/*], per: ip, limit: 3, period: 1m }
bans:
  - { name: b, match: POST /auth/sign_in, per: ip, on: { status: [401] }, limit: 3, period: 1m, ban: 1h }
`;
    const r = await runCli(['check', limitsFile(table)]);
    expect(r.code).toBe(0);
    expect(r.stderr.trim().split('\n')).toEqual([
      'warning: limits[0].match[0]: "POST /inbox" does not match /inbox.json, which Rails routes to the same action (unless the route is declared format: false): write "POST /inbox(.:format)" to count it',
      'warning: limits[0].match[2]: "POST /actor/inbox" does not match /actor/inbox.json, which Rails routes to the same action (unless the route is declared format: false): write "POST /actor/inbox(.:format)" to count it',
      'warning: bans[0].match: "POST /auth/sign_in" does not match /auth/sign_in.json, which Rails routes to the same action (unless the route is declared format: false): write "POST /auth/sign_in(.:format)" to count it',
    ]);
    // The shipped tables carry the suffix wherever Rails routes one (Mastodon's /api is format: false);
    // the chart's sidecar recipe is the example byte for byte (test/packaging/examples.test.ts).
    for (const file of ['config/limits.yaml', 'config/examples/mastodon.yaml']) {
      const shipped = await runCli(['check', file]);
      expect(shipped.code, file).toBe(0);
      expect(shipped.stderr, file).not.toContain('warning:');
    }
  });

  it('refuses a rule for a method that does not exist, as serve does', async () => {
    const file = limitsFile('limits:\n  - { name: api, match: GETT /api/*, per: ip, limit: 10, period: 1m }\n');
    const message =
      'limits[0].match: unknown method "GETT" (did you mean "GET"? a custom method must be listed in methods.custom)';
    const check = await runCli(['check', '--config', file]);
    expect(check.code).toBe(78);
    expect(check.stderr).toContain(message);
    await expect(spawnServe(['--config', file])).rejects.toThrow(message);
  });

  it('refuses an empty file with a clear message', async () => {
    const check = await runCli(['check', '--config', limitsFile('')]);
    expect(check.code).toBe(78);
    expect(check.stderr).toContain(
      '(top level): the file is empty (write the limit table; for a gateway with no limits, say so: "limits: []")',
    );
  });

  it('applies the RATEGATE_* overrides serve applies: a bad RATEGATE_STORE fails it', async () => {
    const file = limitsFile(SEED_TABLE);
    expect((await runCli(['check', '--config', file])).code).toBe(0);
    const bad = await runCli(['check', '--config', file], { RATEGATE_STORE: 'mongodb://db:27017' });
    expect(bad.code).toBe(78);
    expect(bad.stderr).toContain('store.url: invalid store "mongodb://db:27017"');
    expect(bad.stderr).toContain('(set by an override)');
    expect((await runCli(['check', '--config', file], { RATEGATE_LOG_LEVEL: 'loud' })).code).toBe(78);
  });

  it('accepts a custom method listed in methods.custom, and the rule then limits it', async () => {
    const table =
      'methods: { custom: [PURGE] }\nlimits:\n  - { name: purge, match: PURGE /cache/*, per: ip, limit: 1, period: 1h }\n';
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
  it('prints the package version and the revision, as -v does', async () => {
    for (const flag of ['--version', '-v']) {
      const r = await runCli([flag]);
      expect(r.code).toBe(0);
      expect(r.stdout.trim()).toMatch(
        new RegExp(`^rategate ${VERSION.replace(/\./g, '\\.')} \\([0-9a-f]{12}(-dirty)?\\)$`),
      );
    }
  });
});

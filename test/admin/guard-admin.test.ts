/**
 * The attack-day admin writes through a real gateway: the audit line each one leaves and the `who` each
 * entry records; IP bans lifted by the bare address; buckets reset on a lift when asked; the ban
 * counters present at 0 from the start; the cap on live bans per ban.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { capturingLogger, gatewayFixture, startTestGateway, type LogLine } from '../support/gateway.js';
import { runCli } from '../support/process.js';
import { eventually } from '../support/eventually.js';
import { refuseSignIns } from '../support/recording-upstream.js';
import { scaledMs } from '../support/speed.js';

const TOKEN = 'guard-admin-test-token-0123456789';
const TOKEN_ID = createHash('sha256').update(TOKEN).digest('hex').slice(0, 8);

const TABLE = (maxActive = 100) => `limits:
  - { name: ip-access, match: /api/*, per: ip, limit: 3, period: 5m }
bans:
  - { name: login-failures, match: "POST /auth/sign_in", per: ip, on: { status: [401] }, limit: 1, period: 10m, ban: 1h, maxActive: ${maxActive} }
  - { name: spare, match: "POST /never", per: ip, limit: 5, period: 1m, ban: 1m }
admin: { token: ${TOKEN} }
log: { level: warn }
`;

const fx = gatewayFixture({ graceMs: 200 });

function gateway(maxActive?: number) {
  const cap = capturingLogger('warn');
  refuseSignIns(fx.upstream);
  return startTestGateway(TABLE(maxActive), { upstream: fx.upstream.url, logger: cap.logger }).then((gw) => {
    fx.gw = gw;
    return { gw, lines: cap.lines };
  });
}

async function admin(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await fetch(`${fx.gw!.adminUrl}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${TOKEN}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

async function status(path: string, ip: string, init: RequestInit = {}): Promise<number> {
  const r = await fetch(`${fx.gw!.url}${path}`, {
    ...init,
    headers: { 'x-forwarded-for': ip, ...(init.headers as Record<string, string> | undefined) },
  });
  await r.arrayBuffer();
  return r.status;
}

const failedLogin = (ip: string) =>
  status('/auth/sign_in', ip, {
    method: 'POST',
    body: 'user[email]=a@example.com&user[password]=x',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });

async function metrics(): Promise<string> {
  return (await fetch(`${fx.gw!.adminUrl}/metrics`)).text();
}

/** Each ban is logged by the replica that started it: waits for the count (bans start after the answer). */
async function bansStarted(lines: LogLine[], n: number): Promise<void> {
  await eventually(() => lines.filter((l) => l.msg.startsWith('ban started')).length >= n, {
    what: `${n} bans started`,
    withinMs: 2_000,
  });
}

describe('admin writes', () => {
  it('leave one audit line each (what, key, reason, expiry, address, token id), never the token', async () => {
    const { lines } = await gateway();
    expect((await admin('POST', '/admin/blocks', { ip: '192.0.2.1', for: '10m', reason: 'scraper' })).status).toBe(201);
    expect((await admin('DELETE', '/admin/blocks/192.0.2.1?reason=false%20alarm')).status).toBe(200);
    expect((await admin('POST', '/admin/exemptions', { cidr: '198.51.100.0/24', reason: 'office' })).status).toBe(201);
    expect((await admin('DELETE', '/admin/exemptions/198.51.100.0%2F24')).status).toBe(200);
    expect(await failedLogin('203.0.113.5')).toBe(401);
    await bansStarted(lines, 1);
    expect((await admin('DELETE', '/admin/bans/login-failures/ip:203.0.113.5')).status).toBe(200);
    expect((await admin('DELETE', '/admin/buckets?rule=ip-access&key=203.0.113.5')).status).toBe(200);
    // A refused write leaves none.
    expect((await admin('DELETE', '/admin/blocks/192.0.2.99')).status).toBe(404);

    const audit = lines.filter((l) => typeof l.audit === 'string');
    expect(audit.map((l) => l.audit)).toEqual([
      'block.add',
      'block.remove',
      'exempt.add',
      'exempt.remove',
      'ban.lift',
      'bucket.reset',
    ]);
    for (const l of audit) expect(l).toMatchObject({ from: '127.0.0.1', tokenId: TOKEN_ID });
    expect(audit[0]).toMatchObject({ ip: '192.0.2.1', reason: 'scraper', expiresAt: expect.stringMatching(/Z$/) });
    expect(audit[0]!.msg).toBe(
      `admin: block add 192.0.2.1 until ${String(audit[0]!.expiresAt)} (scraper) by token ${TOKEN_ID} from 127.0.0.1`,
    );
    expect(audit[1]).toMatchObject({ ip: '192.0.2.1', reason: 'false alarm' });
    expect(audit[2]).toMatchObject({ cidr: '198.51.100.0/24', reason: 'office' });
    expect(audit[4]).toMatchObject({ ban: 'login-failures', key: 'ip:203.0.113.5' });
    expect(audit[5]).toMatchObject({ rule: 'ip-access', key: 'ip-access:{ip:203.0.113.5}' });
    expect(JSON.stringify(lines)).not.toContain(TOKEN);
  });

  it(
    'record who made each entry, shown by the list endpoints and the CLI',
    async () => {
      const { lines } = await gateway();
      await admin('POST', '/admin/blocks', { ip: '192.0.2.2', reason: 'scraper' });
      expect(await failedLogin('203.0.113.6')).toBe(401);
      await bansStarted(lines, 1);
      const who = `token ${TOKEN_ID} from 127.0.0.1`;
      const blocks = (await admin('GET', '/admin/blocks')).body.entries as Record<string, unknown>[];
      expect(blocks).toEqual([
        expect.objectContaining({ source: 'runtime', ip: '192.0.2.2', reason: 'scraper', who }),
        expect.objectContaining({
          source: 'ban',
          ban: 'login-failures',
          key: 'ip:203.0.113.6',
          who: 'ban login-failures',
        }),
      ]);
      expect((await admin('GET', '/admin/bans')).body.bans).toEqual([
        expect.objectContaining({ key: 'ip:203.0.113.6', who: 'ban login-failures' }),
      ]);
      const cli = await runCli(['block', 'list', '--admin', fx.gw!.adminUrl], { RATEGATE_ADMIN_TOKEN: TOKEN });
      expect(cli.stdout).toMatch(/SOURCE\s+IP\/CIDR\/KEY\s+EXPIRES\s+REASON\s+WHO/);
      expect(cli.stdout).toMatch(new RegExp(`runtime\\s+192\\.0\\.2\\.2\\s+.*scraper\\s+${who}`));
      expect(cli.stdout).toMatch(/ban\s+login-failures ip:203\.0\.113\.6\s+.*ban login-failures/);
    },
    scaledMs(20_000),
  );
});

describe('lifting a ban', () => {
  it(
    'takes the bare IP of an IP ban (IPv6 folded as the ban was), and says what keys look like when none matches',
    async () => {
      const { lines } = await gateway();
      expect(await failedLogin('203.0.113.7')).toBe(401);
      expect(await failedLogin('2001:db8:0:1::5')).toBe(401);
      await bansStarted(lines, 2);
      expect(await status('/api/v1/x', '203.0.113.7')).toBe(403);
      const lifted = await admin('DELETE', '/admin/bans/login-failures/203.0.113.7');
      expect(lifted).toEqual({ status: 200, body: { lifted: { ban: 'login-failures', key: 'ip:203.0.113.7' } } });
      expect(await status('/api/v1/x', '203.0.113.7')).toBe(200);
      expect(
        (await admin('DELETE', `/admin/bans/login-failures/${encodeURIComponent('2001:db8:0:1::abcd')}`)).body,
      ).toEqual({
        lifted: { ban: 'login-failures', key: 'ip:2001:db8:0:1::/64' },
      });
      const none = await admin('DELETE', '/admin/bans/login-failures/203.0.113.8');
      expect(none.status).toBe(404);
      expect(none.body.error).toMatch(
        /^no ban login-failures on 203\.0\.113\.8 \(keys as GET \/admin\/bans lists them: ip:203\.0\.113\.7 or the bare IP/,
      );
      const unknown = await admin('DELETE', '/admin/bans/login-failure/203.0.113.8');
      expect(unknown.body.error).toBe('no ban named "login-failure" (bans: login-failures, spare)');
      // The CLI too.
      expect(await failedLogin('203.0.113.9')).toBe(401);
      await bansStarted(lines, 3);
      const cli = await runCli(['bans', 'lift', 'login-failures', '203.0.113.9', '--admin', fx.gw!.adminUrl], {
        RATEGATE_ADMIN_TOKEN: TOKEN,
      });
      expect(cli.stdout.trim()).toBe('lifted ban login-failures on ip:203.0.113.9');
    },
    scaledMs(20_000),
  );

  it(
    'resets the IP’s buckets when asked (a block lifted too), and leaves them spent otherwise',
    async () => {
      const { lines } = await gateway();
      const ip = '203.0.113.20';
      for (let i = 0; i < 3; i++) expect(await status('/api/v1/x', ip)).toBe(200);
      expect(await status('/api/v1/x', ip)).toBe(429);
      await admin('POST', '/admin/blocks', { ip });
      expect(await status('/api/v1/x', ip)).toBe(403);
      expect((await admin('DELETE', `/admin/blocks/${ip}`)).body).toEqual({ removed: ip });
      expect(await status('/api/v1/x', ip)).toBe(429);
      await admin('POST', '/admin/blocks', { ip });
      expect((await admin('DELETE', `/admin/blocks/${ip}?resetBuckets=true`)).body).toEqual({
        removed: ip,
        bucketsReset: 1,
      });
      expect(await status('/api/v1/x', ip)).toBe(200);
      // A ban lift, through the CLI.
      for (let i = 0; i < 2; i++) await status('/api/v1/x', ip);
      expect(await status('/api/v1/x', ip)).toBe(429);
      expect(await failedLogin(ip)).toBe(401);
      await bansStarted(lines, 1);
      const cli = await runCli(
        ['bans', 'lift', 'login-failures', ip, '--reset-buckets', '--reason', 'customer', '--admin', fx.gw!.adminUrl],
        {
          RATEGATE_ADMIN_TOKEN: TOKEN,
        },
      );
      expect(cli.stdout.trim()).toBe(`lifted ban login-failures on ip:${ip}; 1 buckets reset`);
      expect(await status('/api/v1/x', ip)).toBe(200);
      expect(lines.filter((l) => l.audit === 'ban.lift')).toEqual([
        expect.objectContaining({ reason: 'customer', bucketsReset: 1 }),
      ]);
      // A CIDR names no single client.
      await admin('POST', '/admin/blocks', { cidr: '192.0.2.0/24' });
      expect((await admin('DELETE', `/admin/blocks/192.0.2.0%2F24?resetBuckets=true`)).body).toEqual({
        removed: '192.0.2.0/24',
        bucketsReset: 0,
        note: 'not a single client IP: no bucket was reset',
      });
    },
    scaledMs(20_000),
  );
});

describe('ban metrics and the cap on live bans', () => {
  it('show every ban at 0 before any has started', async () => {
    await gateway();
    const m = await metrics();
    for (const ban of ['login-failures', 'spare']) {
      expect(m).toContain(`rategate_bans_started_total{ban="${ban}"} 0`);
      expect(m).toContain(`rategate_bans_dropped_total{ban="${ban}"} 0`);
      expect(m).toContain(`rategate_bans_active{ban="${ban}"} 0`);
    }
  });

  it('a ban wave beyond maxActive ends the oldest bans: the newest stay, logged once, counted', async () => {
    const { lines } = await gateway(3);
    const ips = [1, 2, 3, 4, 5].map((i) => `198.51.100.${i}`);
    for (const ip of ips) {
      expect(await failedLogin(ip)).toBe(401);
      await bansStarted(lines, ips.indexOf(ip) + 1);
    }
    expect(await Promise.all(ips.map((ip) => status('/api/v1/x', ip)))).toEqual([200, 200, 403, 403, 403]);
    const bans = (await admin('GET', '/admin/bans')).body.bans as { key: string }[];
    expect(bans.map((b) => b.key).sort()).toEqual(['ip:198.51.100.3', 'ip:198.51.100.4', 'ip:198.51.100.5']);
    const m = await metrics();
    expect(m).toContain('rategate_bans_dropped_total{ban="login-failures"} 2');
    expect(m).toContain('rategate_bans_active{ban="login-failures"} 3');
    const capped = lines.filter((l) => /holds its cap/.test(l.msg));
    expect(capped).toHaveLength(1);
    expect(capped[0]!.msg).toBe(
      'ban login-failures holds its cap of 3 live bans: ended the 1 oldest since the last such line (e.g. ip:198.51.100.1)',
    );
  });
});

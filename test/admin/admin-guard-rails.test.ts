/**
 * Issue 38, finding 7: the admin door had no guard rails. A block or exemption wider than
 * admin.maxPrefix (default /16, IPv6 /32) or covering loopback now needs `"force": true` (CLI `--force`);
 * a wrong token is told apart from a missing one; named tokens with scopes, each audit line naming its
 * token. Through a real gateway, the process alive after each refusal.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../src/config/index.js';
import {
  SEED_TABLE,
  capturingLogger,
  gatewayFixture,
  startTestGateway,
  type LogLine,
  type TestGateway,
} from '../support/gateway.js';
import { statusFor } from '../support/http.js';
import { runCli } from '../support/process.js';

const fx = gatewayFixture({ graceMs: 200 });
const CLIENT = '192.0.2.40';

async function gateway(extra = ''): Promise<TestGateway> {
  return (fx.gw = await startTestGateway(`${SEED_TABLE}\n${extra}\n`, { upstream: fx.upstream.url }));
}

/** A gateway whose log lines (warn and up: the audit lines) the test reads. */
async function loggedGateway(extra: string): Promise<{ g: TestGateway; lines: readonly LogLine[] }> {
  const cap = capturingLogger('warn');
  fx.gw = await startTestGateway(`${SEED_TABLE}\n${extra}\n`, { upstream: fx.upstream.url, logger: cap.logger });
  return { g: fx.gw, lines: cap.lines };
}

async function post(
  g: TestGateway,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; error: string }> {
  const r = await fetch(`${g.adminUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const answer = (await r.json()) as { error?: string };
  return { status: r.status, error: answer.error ?? '' };
}

async function alive(g: TestGateway): Promise<void> {
  expect((await fetch(`${g.adminUrl}/healthz`)).status).toBe(200);
  expect(await statusFor(`${g.url}/api/v1/timelines/public`, '192.0.2.99')).toBe(200);
}

describe('a block or exemption too wide to take without force', () => {
  it('0.0.0.0/0 is refused 422 with why and how to force, and every client is still served; with "force": true it is taken', async () => {
    const g = await gateway();
    const refused = await post(g, '/admin/blocks', { cidr: '0.0.0.0/0', for: '1m' });
    expect(refused.status).toBe(422);
    expect(refused.error).toMatch(
      /0\.0\.0\.0\/0 is wider than admin\.maxPrefix \(\/16 for IPv4\).*refused 403.*"force": true \(CLI: --force\)/,
    );
    expect((await post(g, '/admin/exemptions', { cidr: '0.0.0.0/0' })).status).toBe(422);
    expect(await statusFor(`${g.url}/api/v1/timelines/public`, CLIENT)).toBe(200);
    expect((await post(g, '/admin/blocks', { cidr: '0.0.0.0/0', for: '1m', force: 'yes' })).status).toBe(400);
    expect((await post(g, '/admin/blocks', { cidr: '0.0.0.0/0', for: '1m', force: true })).status).toBe(201);
    expect(await statusFor(`${g.url}/api/v1/timelines/public`, CLIENT)).toBe(403);
    expect(
      (await fetch(`${g.adminUrl}/admin/blocks/${encodeURIComponent('0.0.0.0/0')}`, { method: 'DELETE' })).status,
    ).toBe(200);
    await alive(g);
  });

  it('draws the line at admin.maxPrefix, and refuses any range covering loopback, in every spelling', async () => {
    const g = await gateway();
    const add = async (cidr: string): Promise<number> =>
      (await post(g, '/admin/blocks', { [cidr.includes('/') ? 'cidr' : 'ip']: cidr, for: '1m' })).status;
    expect(await add('10.0.0.0/15')).toBe(422);
    expect(await add('10.0.0.0/16')).toBe(201);
    expect(await add('2001:db8::/31')).toBe(422);
    expect(await add('2001:db8::/32')).toBe(201);
    expect(await add('::/0')).toBe(422);
    for (const loopback of [
      '127.0.0.1',
      '127.0.0.0/24',
      '127.255.0.0/16',
      '::1',
      '::ffff:127.0.0.1',
      '::ffff:127.0.0.0/120',
    ]) {
      const r = await post(g, '/admin/blocks', { [loopback.includes('/') ? 'cidr' : 'ip']: loopback, for: '1m' });
      expect(r.status, loopback).toBe(422);
      expect(r.error, loopback).toMatch(/covers loopback/);
    }
    expect((await post(g, '/admin/exemptions', { ip: '127.0.0.1' })).status).toBe(422);
    expect(await add('126.255.255.255')).toBe(201);
    await alive(g);
  });

  it('follows admin.maxPrefix from the file', async () => {
    const g = await gateway('admin: { maxPrefix: { ipv4: 8, ipv6: 24 } }');
    expect((await post(g, '/admin/blocks', { cidr: '10.0.0.0/8' })).status).toBe(201);
    expect((await post(g, '/admin/blocks', { cidr: '2001:d00::/24' })).status).toBe(201);
    expect((await post(g, '/admin/blocks', { cidr: '10.0.0.0/7' })).status).toBe(422);
  });

  it('the CLI says so and exits 65 (EX_DATAERR) without --force, 64 with a misplaced one,, and takes it with --force', async () => {
    const g = await gateway();
    const refused = await runCli(['block', 'add', '0.0.0.0/0', '--for', '1m', '--admin', g.adminUrl]);
    expect(refused.code).toBe(65);
    expect(refused.stderr).toMatch(/wider than admin\.maxPrefix.*--force/);
    expect(await statusFor(`${g.url}/api/v1/timelines/public`, CLIENT)).toBe(200);
    const forced = await runCli(['exempt', 'add', '0.0.0.0/0', '--for', '1m', '--force', '--admin', g.adminUrl]);
    expect(forced.code, forced.stderr).toBe(0);
    const misplaced = await runCli(['block', 'rm', '10.0.0.0/8', '--force', '--admin', g.adminUrl]);
    expect(misplaced.code).toBe(64);
    expect(misplaced.stderr).toMatch(/--force goes with `block add` and `exempt add`/);
    await alive(g);
  });
});

const ALICE = 'alice-0123456789-write-token';
const VIEWER = 'viewer-0123456789-read-token';
const UNNAMED = 'the-unnamed-0123456789-token';

function namedTokens(): string {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'rategate-tokens-')), 'viewer');
  writeFileSync(file, `${VIEWER}\n`);
  return `admin:
  token: ${UNNAMED}
  tokens:
    - { name: alice, token: ${ALICE}, scopes: [read, write] }
    - { name: viewer, tokenFile: ${JSON.stringify(file)}, scopes: [read] }
log: { level: warn }`;
}

const bearer = (t: string): Record<string, string> => ({ authorization: `Bearer ${t}` });

async function get(
  g: TestGateway,
  p: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; error: string }> {
  const r = await fetch(`${g.adminUrl}${p}`, { headers });
  const body = (await r.json()) as { error?: string };
  return { status: r.status, error: body.error ?? '' };
}

describe('admin tokens: missing, wrong, named, scoped', () => {
  it('a missing token is "required", a wrong one "not accepted", one message whatever was sent', async () => {
    // Today's config (one unnamed token), and named ones beside it.
    for (const config of [`admin: { token: ${UNNAMED} }`, namedTokens()]) {
      const g = await gateway(config);
      expect(await get(g, '/admin/blocks')).toEqual({ status: 401, error: 'admin token required' });
      for (const wrong of [
        'Bearer nope',
        'Bearer alice',
        'Bearer viewer',
        `Bearer ${UNNAMED}x`,
        'Basic YWxpY2U6eA==',
        'Token abc',
      ]) {
        expect(await get(g, '/admin/blocks', { authorization: wrong }), wrong).toEqual({
          status: 401,
          error: 'admin token not accepted',
        });
      }
      expect((await get(g, '/status.json', { authorization: 'Bearer nope' })).error).toBe('admin token not accepted');
      expect((await get(g, '/admin/blocks', bearer(UNNAMED))).status).toBe(200);
      await alive(g);
      await g.shutdown(200);
      fx.gw = undefined;
    }
  });

  it('a read-scoped token reads the status page, its JSON, the listings and limited, and is refused every write 403', async () => {
    const g = await gateway(namedTokens());
    for (const p of [
      '/status.json',
      '/admin/blocks',
      '/admin/exemptions',
      '/admin/bans',
      '/admin/limited?rule=sign-up',
      '/admin/surges',
    ]) {
      expect((await get(g, p, bearer(VIEWER))).status, p).toBe(200);
    }
    const basic = `Basic ${Buffer.from(`x:${VIEWER}`).toString('base64')}`;
    expect((await fetch(`${g.adminUrl}/status`, { headers: { authorization: basic } })).status).toBe(200);
    const write = await post(g, '/admin/blocks', { ip: '198.51.100.9' }, bearer(VIEWER));
    expect(write).toEqual({
      status: 403,
      error:
        'token viewer has the read scope only: this write needs a token with the write scope (admin.tokens[].scopes)',
    });
    expect(
      (
        await fetch(`${g.adminUrl}/admin/buckets?rule=sign-up&key=192.0.2.1`, {
          method: 'DELETE',
          headers: bearer(VIEWER),
        })
      ).status,
    ).toBe(403);
    expect(
      (await fetch(`${g.adminUrl}/admin/blocks/198.51.100.9`, { method: 'DELETE', headers: bearer(VIEWER) })).status,
    ).toBe(403);
    expect((await get(g, '/admin/blocks', bearer(ALICE))).status).toBe(200);
    await alive(g);
  });

  it('each audit line and entry names the token that made it; the unnamed token keeps its id and full scope', async () => {
    const { g, lines } = await loggedGateway(namedTokens());
    expect((await post(g, '/admin/blocks', { ip: '198.51.100.10', reason: 'scraper' }, bearer(ALICE))).status).toBe(
      201,
    );
    expect((await post(g, '/admin/exemptions', { ip: '192.0.2.11' }, bearer(UNNAMED))).status).toBe(201);
    const audits = lines.filter((l) => typeof l.audit === 'string');
    expect(audits.map((l) => l.msg)).toEqual([
      expect.stringMatching(
        /^admin: block add 198\.51\.100\.10 until \S+ \(scraper\) by token alice from 127\.0\.0\.1$/,
      ),
      expect.stringMatching(/^admin: exemption add 192\.0\.2\.11 until \S+ by token [0-9a-f]{8} from 127\.0\.0\.1$/),
    ]);
    expect(audits[0]).toMatchObject({
      audit: 'block.add',
      token: 'alice',
      tokenId: expect.stringMatching(/^[0-9a-f]{8}$/),
    });
    expect(audits[1]!.token).toBeUndefined();
    const list = (await (await fetch(`${g.adminUrl}/admin/blocks`, { headers: bearer(VIEWER) })).json()) as {
      entries: { ip?: string; who?: string }[];
    };
    expect(list.entries.find((e) => e.ip === '198.51.100.10')?.who).toBe('token alice from 127.0.0.1');
    expect(JSON.stringify(lines)).not.toContain(ALICE);
    await alive(g);
  });

  it('refuses a token entry with both or neither secret, a name given twice, and the same token twice', async () => {
    const errors = (yaml: string): string[] => {
      try {
        parseConfig(`${SEED_TABLE}\n${yaml}\n`, 'test.yaml', {});
      } catch (err) {
        if (err instanceof ConfigError) return err.errors;
        throw err;
      }
      return [];
    };
    expect(errors('admin: { tokens: [{ name: a, token: x, tokenFile: /f, scopes: [read] }] }').join()).toMatch(
      /admin\.tokens\[0\].*one of token or tokenFile/,
    );
    expect(errors('admin: { tokens: [{ name: a, scopes: [read] }] }').join()).toMatch(/one of token or tokenFile/);
    expect(
      errors(
        'admin: { tokens: [{ name: a, token: x, scopes: [read] }, { name: a, token: y, scopes: [read] }] }',
      ).join(),
    ).toMatch(/"a" is given twice/);
    expect(errors('admin: { tokens: [{ name: a, token: x, scopes: [] }] }').length).toBeGreaterThan(0);
    expect(errors('admin: { tokens: [{ name: "a b", token: x, scopes: [read] }] }').length).toBeGreaterThan(0);
    await expect(
      gateway('admin: { token: same-token, tokens: [{ name: a, token: same-token, scopes: [read] }] }'),
    ).rejects.toThrow(/the same token as another/);
  });
});

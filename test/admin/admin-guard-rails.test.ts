/**
 * Issue 38, finding 7: the admin door had no guard rails. A block or exemption wider than
 * admin.maxPrefix (default /16, IPv6 /32) or covering loopback now needs `"force": true` (CLI `--force`);
 * a wrong token is told apart from a missing one; named tokens with scopes, each audit line naming its
 * token. Through a real gateway, the process alive after each refusal.
 */
import { describe, expect, it } from 'vitest';
import { SEED_TABLE, gatewayFixture, startTestGateway, type TestGateway } from '../support/gateway.js';
import { statusFor } from '../support/http.js';
import { runCli } from '../support/process.js';

const fx = gatewayFixture({ graceMs: 200 });
const CLIENT = '192.0.2.40';

async function gateway(extra = ''): Promise<TestGateway> {
  return (fx.gw = await startTestGateway(`${SEED_TABLE}\n${extra}\n`, { upstream: fx.upstream.url }));
}

async function post(g: TestGateway, path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; error: string }> {
  const r = await fetch(`${g.adminUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
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
    expect(refused.error).toMatch(/0\.0\.0\.0\/0 is wider than admin\.maxPrefix \(\/16 for IPv4\).*refused 403.*"force": true \(CLI: --force\)/);
    expect((await post(g, '/admin/exemptions', { cidr: '0.0.0.0/0' })).status).toBe(422);
    expect(await statusFor(`${g.url}/api/v1/timelines/public`, CLIENT)).toBe(200);
    expect((await post(g, '/admin/blocks', { cidr: '0.0.0.0/0', for: '1m', force: 'yes' })).status).toBe(400);
    expect((await post(g, '/admin/blocks', { cidr: '0.0.0.0/0', for: '1m', force: true })).status).toBe(201);
    expect(await statusFor(`${g.url}/api/v1/timelines/public`, CLIENT)).toBe(403);
    expect((await fetch(`${g.adminUrl}/admin/blocks/${encodeURIComponent('0.0.0.0/0')}`, { method: 'DELETE' })).status).toBe(200);
    await alive(g);
  });

  it('draws the line at admin.maxPrefix, and refuses any range covering loopback, in every spelling', async () => {
    const g = await gateway();
    const add = async (cidr: string): Promise<number> => (await post(g, '/admin/blocks', { [cidr.includes('/') ? 'cidr' : 'ip']: cidr, for: '1m' })).status;
    expect(await add('10.0.0.0/15')).toBe(422);
    expect(await add('10.0.0.0/16')).toBe(201);
    expect(await add('2001:db8::/31')).toBe(422);
    expect(await add('2001:db8::/32')).toBe(201);
    expect(await add('::/0')).toBe(422);
    for (const loopback of ['127.0.0.1', '127.0.0.0/24', '127.255.0.0/16', '::1', '::ffff:127.0.0.1', '::ffff:127.0.0.0/120']) {
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

  it('the CLI says so and exits 1 without --force, and takes it with --force', async () => {
    const g = await gateway();
    const refused = await runCli(['block', 'add', '0.0.0.0/0', '--for', '1m', '--admin', g.adminUrl]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/wider than admin\.maxPrefix.*--force/);
    expect(await statusFor(`${g.url}/api/v1/timelines/public`, CLIENT)).toBe(200);
    const forced = await runCli(['exempt', 'add', '0.0.0.0/0', '--for', '1m', '--force', '--admin', g.adminUrl]);
    expect(forced.code, forced.stderr).toBe(0);
    const misplaced = await runCli(['block', 'rm', '10.0.0.0/8', '--force', '--admin', g.adminUrl]);
    expect(misplaced.code).toBe(1);
    expect(misplaced.stderr).toMatch(/--force goes with `block add` and `exempt add`/);
    await alive(g);
  });
});

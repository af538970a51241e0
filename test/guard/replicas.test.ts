/**
 * The day of an attack, through real processes: two gateway processes sharing a real Redis. Failed
 * logins ban an IP on both replicas within 1 s and the ban ends by itself; a runtime block made with the
 * CLI applies on both within 1 s and expires; `scope: store` in-flight slots are shared.
 */
import { cliArgs, spawnServe } from '../support/process.js';
import { execFile, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { limitsFile } from '../support/gateway.js';
import { startRecordingUpstream, type RecordingUpstream, refuseSignIns } from '../support/recording-upstream.js';
import { skipRedis, startRedis, type RedisHandle } from '../support/redis.js';
import { Redis } from 'ioredis';
import { statusFor as status, untilEveryAnswers as until } from '../support/http.js';
import { scaledMs, slowdown } from '../support/speed.js';

const TOKEN = 'attack-test-admin-token';
const run = promisify(execFile);

interface Proc {
  url: string;
  adminUrl: string;
  child: ChildProcess;
  out: () => string;
}

async function spawnGateway(configPath: string, store: string, upstream: string): Promise<Proc> {
  const p = await spawnServe(
    ['--config', configPath, '--upstream', upstream, '--store', store],
    { RATEGATE_LOG_LEVEL: 'warn', RATEGATE_ADMIN_TOKEN: TOKEN },
    30_000,
  );
  return { url: p.url, adminUrl: p.adminUrl, child: p.child, out: p.output };
}

async function stop(p: Proc): Promise<void> {
  if (p.child.exitCode !== null) return;
  await new Promise<void>((r) => {
    p.child.once('exit', () => r());
    p.child.kill('SIGTERM');
  });
}

function cli(args: string[]): Promise<{ code: number; out: string }> {
  return run(process.execPath, cliArgs(args), { env: { ...process.env, RATEGATE_ADMIN_TOKEN: TOKEN } }).then(
    (r) => ({ code: 0, out: r.stdout + r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout + e.stderr }),
  );
}

/**
 * How long the ban and the runtime block last: 12 s idle (room for the CLI's start), stretched by the
 * machine's slowdown, so a loaded machine's slow requests never outlast them (the waits for their end
 * stretch by the same factor).
 */
const HOLD = `${Math.ceil(12 * slowdown())}s`;

const BANS = `limits:
  - { name: ip-access, match: /api/*, per: ip, limit: 1000, period: 5m }
bans:
  - name: login-failures
    match: POST /auth/sign_in(.:format)
    per: ip
    on: { status: [401, 422] }
    limit: 10
    period: 10m
    ban: ${HOLD}
store: { timeout: 2s }
`;

describe.skipIf(skipRedis('attack-day features on two replicas'))('two gateway processes sharing a Redis', () => {
  let redis: RedisHandle;
  let upstream: RecordingUpstream;
  let gws: Proc[] = [];
  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    refuseSignIns(upstream);
    const config = limitsFile(BANS);
    gws = await Promise.all([0, 1].map(() => spawnGateway(config, redis.url, upstream.url)));
  }, scaledMs(60_000));
  afterAll(async () => {
    await Promise.all(gws.map(stop));
    await upstream?.close();
    await redis?.stop();
  });

  it(
    'ban an IP on both replicas within 1 s of its 10th failed login; others pass; the ban ends by itself',
    async () => {
      const attacker = '203.0.113.66';
      const other = '198.51.100.7';
      const urls = gws.map((g) => g.url);
      const login = {
        method: 'POST',
        body: 'user[email]=a@example.com&user[password]=x',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      };
      for (let i = 0; i < 9; i++) expect(await status(`${urls[i % 2]}/auth/sign_in`, attacker, login)).toBe(401);
      // Not banned before the 10th.
      expect(await status(`${urls[0]}/api/v1/timelines/home`, attacker)).toBe(200);
      expect(await status(`${urls[1]}/auth/sign_in`, attacker, login)).toBe(401);
      const took = await until(
        urls.map((u) => `${u}/api/v1/timelines/home`),
        attacker,
        403,
        1_000,
      );
      const seenBefore = upstream
        .forwarded()
        .filter((s) => s.headers['x-forwarded-for']?.toString().startsWith(attacker)).length;
      // Everything from it is refused, on every route, on both replicas, never forwarded.
      for (const u of urls) {
        const r = await fetch(`${u}/auth/sign_in`, {
          ...login,
          headers: { ...login.headers, 'x-forwarded-for': attacker },
        });
        expect(r.status).toBe(403);
        expect(await r.json()).toEqual({ error: 'Forbidden' });
        expect(await status(`${u}/anything/else`, attacker)).toBe(403);
        expect(await status(`${u}/api/v1/timelines/home`, other)).toBe(200);
      }
      expect(
        upstream.forwarded().filter((s) => s.headers['x-forwarded-for']?.toString().startsWith(attacker)).length,
      ).toBe(seenBefore);
      // Refused requests cost the store nothing: 200 of them move Redis's calls only by the replicas'
      // polls of the change log (one script call each per 250 ms), and read no entry.
      const probe = new Redis(redis.url);
      const calls = async (cmd: string) =>
        Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(await probe.info('commandstats'))?.[1] ?? 0);
      const before = { scripts: await calls('evalsha'), reads: (await calls('hgetall')) + (await calls('hscan')) };
      const t0 = Date.now();
      for (let i = 0; i < 200; i++) expect(await status(`${urls[i % 2]}/api/v1/timelines/home`, attacker)).toBe(403);
      const polls = Math.ceil((Date.now() - t0) / 250 + 1) * 2;
      expect((await calls('evalsha')) - before.scripts).toBeLessThanOrEqual(polls + 2);
      expect((await calls('hgetall')) + (await calls('hscan')) - before.reads).toBe(0);
      probe.disconnect();

      const metrics = await Promise.all(gws.map(async (g) => (await fetch(`${g.adminUrl}/metrics`)).text()));
      for (const m of metrics) {
        expect(m).toContain('rategate_bans_active{ban="login-failures"} 1');
        expect(m).toMatch(/rategate_banned_requests_total\{ban="login-failures"\} [1-9]/);
      }
      expect(metrics.join('\n')).toContain('rategate_bans_started_total{ban="login-failures"} 1');
      // Listed by the admin API and the CLI, with its ban and key.
      const listed = await cli(['bans', 'list', '--admin', gws[1]!.adminUrl]);
      expect(listed.code).toBe(0);
      expect(listed.out).toMatch(new RegExp(`login-failures\\s+ip:${attacker.replace(/\./g, '\\.')}`));
      // Logged once, on the replica that started it.
      const started = gws.map((g) => (g.out().match(/ban started/g) ?? []).length);
      expect(started.reduce((a, b) => a + b)).toBe(1);

      // It ends by itself (ban: HOLD), on both.
      await until(
        urls.map((u) => `${u}/api/v1/timelines/home`),
        attacker,
        200,
        14_000,
      );
      console.log(`ban applied on both replicas ${took} ms after the 10th failed login`);
      for (const g of gws) expect(g.child.exitCode).toBeNull();
    },
    scaledMs(30_000),
  );

  it(
    'a runtime block made with the CLI applies on both replicas within 1 s and expires; rm lifts one at once',
    async () => {
      const urls = gws.map((g) => `${g.url}/api/v1/timelines/home`);
      const ip = '192.0.2.77';
      expect(await status(urls[0]!, ip)).toBe(200);
      const add = await cli(['block', 'add', ip, '--for', HOLD, '--reason', 'scraper', '--admin', gws[0]!.adminUrl]);
      expect(add.code).toBe(0);
      expect(add.out).toContain(`blocked ${ip} until`);
      const took = await until(urls, ip, 403, 1_000);
      // Listed on the other replica with source, reason and expiry.
      const list = await cli(['block', 'list', '--admin', gws[1]!.adminUrl]);
      expect(list.out).toMatch(
        new RegExp(`runtime\\s+${ip.replace(/\./g, '\\.')}\\s+\\S+Z \\(in ([0-9]+m)?[0-9]+s\\)\\s+scraper`),
      );
      await until(urls, ip, 200, 16_000);

      // A CIDR, removed by hand before its time.
      await cli(['block', 'add', '192.0.2.0/28', '--for', '1h', '--admin', gws[1]!.adminUrl]);
      await until(urls, '192.0.2.5', 403, 1_000);
      const rm = await cli(['block', 'rm', '192.0.2.0/28', '--admin', gws[0]!.adminUrl]);
      expect(rm.out).toContain('removed block 192.0.2.0/28');
      await until(urls, '192.0.2.5', 200, 1_000);
      expect(await (await fetch(`${gws[1]!.adminUrl}/metrics`)).text()).toMatch(
        /rategate_blocked_requests_total\{source="runtime"\} [1-9]/,
      );
      // A bad address is refused with the API's message, and the CLI exits 65 (EX_DATAERR).
      const bad = await cli(['block', 'add', 'not-an-ip', '--admin', gws[0]!.adminUrl]);
      expect(bad.code).toBe(65);
      expect(bad.out).toContain('invalid IP address or CIDR "not-an-ip"');
      console.log(`runtime block applied on both replicas ${took} ms after the CLI returned`);

      // Exemptions through the CLI, listed on the other replica; the API wants the admin token.
      const ex = await cli([
        'exempt',
        'add',
        '100.64.0.0/24',
        '--for',
        '30m',
        '--reason',
        'office',
        '--admin',
        gws[0]!.adminUrl,
      ]);
      expect(ex.out).toContain('exempted 100.64.0.0/24 until');
      const exList = await cli(['exempt', 'list', '--admin', gws[1]!.adminUrl]);
      expect(exList.out).toMatch(/runtime\s+100\.64\.0\.0\/24\s+\S+Z \(in (29m|30m)\S*\)\s+office/);
      const anonymous = await fetch(`${gws[0]!.adminUrl}/admin/blocks`, { method: 'POST', body: '{"ip":"192.0.2.1"}' });
      expect(anonymous.status).toBe(401);
    },
    scaledMs(30_000),
  );
});

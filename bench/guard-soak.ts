/**
 * @module Soak of a large guard state: two gateway processes sharing one Redis that holds N runtime
 * blocks and bans (default 300 000), and what each change costs them.
 *
 *   node --import tsx bench/guard-soak.ts [--entries 300000] [--rounds 10] [--admin-blocks 2000] [--wave 5000]
 *   (it runs `npm run build` first: the gateways run dist/, as in production)
 *
 * Measured, in order:
 *   1. start: each replica reads the whole set once (HSCAN in chunks); time to ready and RSS after;
 *   2. `--rounds` times each: a block added on replica A until both refuse the IP, lifted on B until
 *      both let it in; a ban started on A (one failed login, limit 1) until both refuse, lifted on B
 *      until both let it in (each replica polled every 5 ms; the figure is the later of the two);
 *   3. meanwhile, the latency of ordinary requests (about 100 a second over both replicas) against the
 *      same load before any change;
 *   4. `--admin-blocks` blocks through replica A's admin API, one after the other (issue 27: 10 000
 *      took 151 s when every change made both replicas re-read everything);
 *   5. a ban wave: `--wave` failed logins from distinct IPs on A, and the CPU replica B spends applying
 *      the bans meanwhile; then B's CPU over 10 s idle.
 * Prints a table and one JSON line. The seeded state is written as the gateway writes it (the entries
 * hash and the expiry sets, a version without change records), so each replica reads it whole at start.
 */
import http from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { spawnSync } from 'node:child_process';
import { cpuMsOfTree, freePort, killAll, rssOf, sleep, start, waitForPort, type Proc } from './lib/procs.js';

const arg = (name: string, dflt: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? dflt : Number(process.argv[i + 1]);
};
const ENTRIES = arg('entries', 300_000);
const ROUNDS = arg('rounds', 10);
const ADMIN_BLOCKS = arg('admin-blocks', 2_000);
const WAVE = arg('wave', 5_000);
const TOKEN = 'guard-soak-token';
const PREFIX = 'rategate';

interface Gateway {
  proc: Proc;
  url: string;
  admin: string;
}

/** A block IP, a ban IP, a fresh IP: three disjoint ranges. */
const blockIp = (i: number): string => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
const banIp = (i: number): string => `100.${64 + ((i >> 16) & 63)}.${(i >> 8) & 255}.${i & 255}`;
const freshIp = (i: number): string => `172.${16 + ((i >> 16) & 15)}.${(i >> 8) & 255}.${i & 255}`;

async function seed(redisUrl: string): Promise<void> {
  const r = new Redis(redisUrl);
  const tag = `${PREFIX}:{guard}`;
  const now = Date.now();
  const until = now + 6 * 3_600_000;
  const json = (who: string) => JSON.stringify({ reason: 'soak', createdAt: now, expiresAt: until, who });
  for (let from = 0; from < ENTRIES; from += 10_000) {
    const p = r.pipeline();
    for (let i = from; i < Math.min(ENTRIES, from + 10_000); i++) {
      // Two thirds bans (two ban names), one third blocks.
      if (i % 3 === 0) {
        const f = `block|${blockIp(i)}`;
        p.hset(`${tag}:entries`, f, json('soak'));
        p.zadd(`${tag}:exp:block`, until, f);
      } else {
        const ban = i % 3 === 1 ? 'login-failures' : 'spam';
        const f = `ban|${ban}/ip:${banIp(i)}`;
        p.hset(`${tag}:entries`, f, json(`ban ${ban}`));
        p.zadd(`${tag}:exp:ban:${ban}`, until, f);
      }
    }
    await p.exec();
  }
  await r.set(`${tag}:version`, 1);
  r.disconnect();
}

function upstream(): Promise<http.Server> {
  const s = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const login = req.url?.startsWith('/auth/sign_in') === true;
      res.writeHead(login ? 401 : 200, { 'content-type': 'application/json' });
      res.end(login ? '{"error":"Invalid Email or password."}' : '{}');
    });
  });
  return new Promise((resolve) => s.listen(0, '127.0.0.1', () => resolve(s)));
}

async function gateway(
  cli: string,
  config: string,
  redisUrl: string,
  upstreamUrl: string,
  name: string,
): Promise<Gateway> {
  const port = await freePort();
  const adminPort = await freePort();
  const proc = start(
    name,
    process.execPath,
    [
      cli,
      'serve',
      '--config',
      config,
      '--store',
      redisUrl,
      '--upstream',
      upstreamUrl,
      '--listen',
      `127.0.0.1:${port}`,
      '--admin-listen',
      `127.0.0.1:${adminPort}`,
    ],
    { RATEGATE_ADMIN_TOKEN: TOKEN, RATEGATE_LOG_LEVEL: 'error' },
  );
  await waitForPort(proc, adminPort, 120_000);
  return { proc, url: `http://127.0.0.1:${port}`, admin: `http://127.0.0.1:${adminPort}` };
}

async function status(url: string, ip: string, init: RequestInit = {}): Promise<number> {
  const r = await fetch(url, {
    ...init,
    headers: { 'x-forwarded-for': ip, ...(init.headers as Record<string, string> | undefined) },
  });
  await r.arrayBuffer();
  return r.status;
}

async function admin(gw: Gateway, method: string, p: string, body?: unknown): Promise<number> {
  const r = await fetch(gw.admin + p, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  await r.arrayBuffer();
  return r.status;
}

const login = {
  method: 'POST',
  body: 'user[email]=a@example.com&user[password]=x',
  headers: { 'content-type': 'application/x-www-form-urlencoded' },
};

/** ms until every gateway answers `want` for `ip` (each polled every 5 ms). */
async function applied(gws: readonly Gateway[], ip: string, want: number, t0: number): Promise<number> {
  const each = await Promise.all(
    gws.map(async (g) => {
      while ((await status(`${g.url}/api/v1/x`, ip)) !== want) {
        if (Date.now() - t0 > 30_000) throw new Error(`${g.proc.name} never answered ${want} for ${ip}`);
        await sleep(5);
      }
      return Date.now() - t0;
    }),
  );
  return Math.max(...each);
}

/** Ordinary requests at about `rps` over both replicas until stopped; their latencies in ms. */
function probeLoad(gws: readonly Gateway[], rps: number): { stop: () => Promise<number[]> } {
  const lat: number[] = [];
  let on = true;
  const loop = (async () => {
    for (let i = 0; on; i++) {
      const t = performance.now();
      await status(`${gws[i % gws.length]!.url}/api/v1/timelines/home`, freshIp(900_000 + (i % 500)));
      lat.push(performance.now() - t);
      await sleep(Math.max(0, 1000 / rps - (performance.now() - t)));
    }
  })();
  return {
    stop: async () => {
      on = false;
      await loop;
      return lat;
    },
  };
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

async function changeRounds(a: Gateway, b: Gateway): Promise<Record<string, number[]>> {
  const out: Record<string, number[]> = { blockAdd: [], blockLift: [], banStart: [], banLift: [] };
  for (let k = 0; k < ROUNDS; k++) {
    const ip = freshIp(k);
    let t0 = Date.now();
    if ((await admin(a, 'POST', '/admin/blocks', { ip, for: '1h' })) !== 201) throw new Error('block add failed');
    out.blockAdd!.push(await applied([a, b], ip, 403, t0));
    t0 = Date.now();
    await admin(b, 'DELETE', `/admin/blocks/${ip}`);
    out.blockLift!.push(await applied([a, b], ip, 200, t0));
    const bad = freshIp(1_000 + k);
    t0 = Date.now();
    await status(`${a.url}/auth/sign_in`, bad, login);
    out.banStart!.push(await applied([a, b], bad, 403, t0));
    t0 = Date.now();
    await admin(b, 'DELETE', `/admin/bans/login-failures/${bad}`);
    out.banLift!.push(await applied([a, b], bad, 200, t0));
  }
  return out;
}

async function banWave(a: Gateway, b: Gateway): Promise<{ seconds: number; cpuMsB: number }> {
  const cpu0 = cpuMsOfTree(b.proc.pid);
  const t0 = Date.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      while (next < WAVE) await status(`${a.url}/auth/sign_in`, freshIp(100_000 + next++), login);
    }),
  );
  // Until B holds the last one.
  await applied([b], freshIp(100_000 + WAVE - 1), 403, Date.now());
  return { seconds: (Date.now() - t0) / 1000, cpuMsB: cpuMsOfTree(b.proc.pid) - cpu0 };
}

function build(): string {
  const r = spawnSync('npm', ['run', '--silent', 'build'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`npm run build failed: ${r.stdout}${r.stderr}`);
  return 'dist/cli/index.js';
}

async function main(): Promise<void> {
  const cli = build();
  const redisPort = await freePort();
  const redis = start('redis-server', 'redis-server', [
    '--port',
    String(redisPort),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
  ]);
  await waitForPort(redis, redisPort);
  const redisUrl = `redis://127.0.0.1:${redisPort}`;
  const up = await upstream();
  const upUrl = `http://127.0.0.1:${(up.address() as { port: number }).port}`;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rategate-guard-soak-'));
  const config = path.join(dir, 'limits.yaml');
  writeFileSync(
    config,
    `limits:
  - { name: ip-access, match: /api/*, per: ip, limit: 1000000, period: 5m }
bans:
  - { name: login-failures, match: "POST /auth/sign_in", per: ip, on: { status: [401] }, limit: 1, period: 10m, ban: 1h, maxActive: 1000000 }
  - { name: spam, match: "POST /never", per: ip, limit: 1000, period: 1m, ban: 1h, maxActive: 1000000 }
store: { timeout: 2s }
`,
  );
  let t = Date.now();
  await seed(redisUrl);
  console.log(`seeded ${ENTRIES} entries in ${Date.now() - t} ms`);
  t = Date.now();
  const [a, b] = await Promise.all([
    gateway(cli, config, redisUrl, upUrl, 'gateway A'),
    gateway(cli, config, redisUrl, upUrl, 'gateway B'),
  ]);
  await applied([a!, b!], blockIp(0), 403, Date.now());
  const startMs = Date.now() - t;
  const rssStart = [rssOf(a!.proc.pid), rssOf(b!.proc.pid)];

  const base = probeLoad([a!, b!], 100);
  await sleep(3_000);
  const baseline = await base.stop();
  const during = probeLoad([a!, b!], 100);
  const rounds = await changeRounds(a!, b!);
  const changed = await during.stop();

  t = Date.now();
  for (let i = 0; i < ADMIN_BLOCKS; i++)
    await admin(a!, 'POST', '/admin/blocks', { ip: freshIp(50_000 + i), for: '1h' });
  const adminSeconds = (Date.now() - t) / 1000;
  await applied([b!], freshIp(50_000 + ADMIN_BLOCKS - 1), 403, Date.now());
  const wave = await banWave(a!, b!);
  const idle0 = cpuMsOfTree(b!.proc.pid);
  await sleep(10_000);
  const idleCpuPct = (cpuMsOfTree(b!.proc.pid) - idle0) / 100;
  const rssEnd = [rssOf(a!.proc.pid), rssOf(b!.proc.pid)];

  const mb = (x: number) => `${(x / 1048576).toFixed(0)} MB`;
  const show = (xs: number[]) => `median ${pct(xs, 50)} ms, max ${Math.max(...xs)} ms`;
  console.log(`
entries in the store            ${ENTRIES}
both replicas started and ready ${startMs} ms (each read the whole set once); RSS ${rssStart.map(mb).join(' / ')}
block added → both refuse       ${show(rounds.blockAdd!)}   (${ROUNDS} rounds)
block lifted → both admit       ${show(rounds.blockLift!)}
ban started → both refuse       ${show(rounds.banStart!)}
ban lifted → both admit         ${show(rounds.banLift!)}
ordinary requests, no changes   p50 ${pct(baseline, 50).toFixed(1)} ms, p99 ${pct(baseline, 99).toFixed(1)} ms (${baseline.length})
ordinary requests, changes      p50 ${pct(changed, 50).toFixed(1)} ms, p99 ${pct(changed, 99).toFixed(1)} ms (${changed.length})
${ADMIN_BLOCKS} blocks via admin API    ${adminSeconds.toFixed(1)} s (${((adminSeconds * 1000) / ADMIN_BLOCKS).toFixed(2)} ms each)
ban wave of ${WAVE} (A)            ${wave.seconds.toFixed(1)} s; replica B's CPU meanwhile ${wave.cpuMsB.toFixed(0)} ms (${((wave.cpuMsB * 1000) / WAVE).toFixed(0)} µs per ban)
replica B idle                  ${idleCpuPct.toFixed(2)} % CPU over 10 s
RSS at the end                  ${rssEnd.map(mb).join(' / ')}`);
  console.log(
    JSON.stringify({
      entries: ENTRIES,
      startMs,
      rssStart,
      rounds,
      baseline: { p50: pct(baseline, 50), p99: pct(baseline, 99) },
      changed: { p50: pct(changed, 50), p99: pct(changed, 99) },
      adminSeconds,
      wave,
      idleCpuPct,
      rssEnd,
    }),
  );
  await Promise.all([a!.proc.stop(), b!.proc.stop()]);
  await redis.stop();
  up.close();
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    killAll();
    process.exit(1);
  },
);

/**
 * Replay decides as `serve` does: one request sequence goes to a real gateway on loopback (its clock a
 * fake one, set to each request's time) and, written as the nginx log of the same requests at the same
 * times, through replay. Every request gets the same verdict (allowed, limited by the same rule, exempt,
 * blocked, unmatched), and the per-rule counts agree. The client is named by X-Forwarded-For from the
 * loopback peer (a trusted proxy by default), in the gateway and in the log alike.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { formatNamed } from '../../src/replay/formats.js';
import { runReplay } from '../../src/replay/run.js';
import { FakeClock } from '../support/clock.js';
import { accessLine, capturingLogger, startTestGateway, type LogLine, type TestGateway } from '../support/gateway.js';
import { send } from '../support/http.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { scaledMs } from '../support/speed.js';

const TABLE = `block: { ips: [203.0.113.66] }
exempt: { ips: [192.0.2.99] }
limits:
  - { name: account-access, match: /api/*, per: account, limit: 300, period: 5m }
  - { name: ip-access, match: /api/*, per: ip, limit: 8, period: 1m }
  - { name: sign-up, match: POST /api/v1/accounts, per: ip, limit: 2, period: 10m }
  - { name: public, match: GET /api/v1/timelines/public, per: ip, limit: 3, period: 30s, algorithm: sliding-window }
  - { name: watch, match: /api/v1/timelines/*, per: ip, limit: 2, period: 1m, shadow: true }
  - { name: media, match: /media_proxy/*, per: global, limit: 4, period: 1m }
`;

const IPS = ['198.51.100.1', '198.51.100.2', '2001:db8::7', '2001:db8::8', '192.0.2.99', '203.0.113.66'];
const REQUESTS = [
  'GET /api/v1/timelines/home',
  'GET /api/v1/timelines/public',
  'POST /api/v1/accounts',
  'GET /media_proxy/1',
  'GET /about',
  'DELETE /api/v1/statuses/5',
];
const FORMAT = 'nginx:$remote_addr - - [$time_local] "$request" $status "$http_x_forwarded_for"';
const T0 = Date.UTC(2026, 10, 21, 10, 0, 0);

/** A seeded generator: the same sequence every run. */
function rng(seed: number): () => number {
  let a = seed;
  return () => ((a = (Math.imul(a, 1103515245) + 12345) >>> 0) >>> 8) / (1 << 24);
}

function timeLocal(ms: number): string {
  const d = new Date(ms).toUTCString(); // "Sat, 21 Nov 2026 10:00:05 GMT"
  const [, day, mon, year, hms] = d.split(' ');
  return `${day}/${mon}/${year}:${hms} +0000`;
}

describe('replay and serve agree', () => {
  let upstream: RecordingUpstream;
  let gw: TestGateway;
  let lines: LogLine[];
  const clock = new FakeClock(T0);

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    const cap = capturingLogger();
    lines = cap.lines;
    gw = await startTestGateway(TABLE, { upstream: upstream.url, now: clock.now, logger: cap.logger });
  });
  afterAll(async () => {
    await gw.shutdown(200);
    await upstream.close();
  });

  it(
    'gives every request of a sequence the same verdict',
    async () => {
      const rand = rng(7);
      const log: string[] = [];
      const served: string[] = [];
      let t = T0;
      for (let i = 0; i < 400; i++) {
        // Whole seconds (what $time_local keeps); bursts of several requests in one second.
        t += rand() < 0.5 ? 0 : Math.floor(rand() * 6) * 1000;
        clock.set(t);
        const ip = IPS[Math.floor(rand() * IPS.length)]!;
        const req = REQUESTS[Math.floor(rand() * REQUESTS.length)]!;
        const [method, target] = req.split(' ') as [string, string];
        const id = `r${i}`;
        const answer = await send(gw.url, {
          method,
          path: target,
          headers: { 'X-Forwarded-For': ip, 'X-Request-Id': id },
        });
        log.push(`127.0.0.1 - - [${timeLocal(t)}] "${req} HTTP/1.1" ${answer.status} "${ip}"`);
        served.push(verdictOf(await accessLine(lines, id)));
      }
      const replayed: string[] = [];
      const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'replay-agree-')), 'access.log');
      writeFileSync(file, log.join('\n') + '\n');
      const report = await runReplay({
        snapshot: parseConfig(TABLE, 't.yaml'),
        format: formatNamed(FORMAT),
        sources: [file],
        onDecision: (d) => replayed.push(`${d.kind}${d.rejectedBy === undefined ? '' : ` by ${d.rejectedBy.name}`}`),
      });
      // Blocked requests are decided before anything is counted in both; replay's tally skips none.
      expect(replayed).toEqual(served);
      expect(served.filter((v) => v.startsWith('limited by ')).length).toBeGreaterThan(20);
      expect(new Set(served.filter((v) => v.startsWith('limited')))).toEqual(
        new Set(['limited by ip-access', 'limited by sign-up', 'limited by public', 'limited by media']),
      );
      expect(report.limited).toBe(served.filter((v) => v.startsWith('limited')).length);
      expect(report.rules.find((r) => r.name === 'watch')!.limited).toBeGreaterThan(0);
    },
    scaledMs(60_000),
  );
});

function verdictOf(line: LogLine): string {
  return `${String(line.decision)}${line.rule === undefined ? '' : ` by ${String(line.rule)}`}`;
}

const BANS_TABLE = `limits:
  - { name: ip-access, match: /api/*, per: ip, limit: 6, period: 1m }
bans:
  - { name: login-failures, match: POST /auth/sign_in, per: ip, on: { status: [401, 422] }, limit: 3, period: 10m, ban: 30s }
  - { name: scanners, match: GET /wp-login.php, per: ip, on: { status: [404] }, limit: 3, period: 1m, ban: 10s }
  - { name: hammer, match: GET /api/v1/timelines/home, per: ip, limit: 5, period: 1m, ban: 10s }
  - { name: past-limit, match: /api/*, per: ip, on: { status: [429] }, limit: 3, period: 1m, ban: 20s }
concurrency:
  - { name: streaming, match: GET /api/v1/streaming, per: ip, max: 2 }
`;
const BAN_IPS = ['198.51.100.1', '198.51.100.2', '2001:db8::7', '192.0.2.5'];
const BAN_REQUESTS = [
  'POST /auth/sign_in',
  'GET /api/v1/timelines/home',
  'GET /api/v1/timelines/home',
  'GET /api/v1/timelines/public',
  'GET /api/v1/timelines/public',
  'GET /wp-login.php',
  'GET /api/v1/streaming',
  'GET /about',
];

describe('replay and serve agree on bans', () => {
  let upstream: RecordingUpstream;
  let gw: TestGateway;
  let lines: LogLine[];
  const clock = new FakeClock(T0);

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    // The upstream answers what the test asks of it (X-Answer): the status the log of the same request holds.
    upstream.route('/', (req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(Number(req.headers['x-answer'] ?? 200)).end());
    });
    const cap = capturingLogger();
    lines = cap.lines;
    gw = await startTestGateway(BANS_TABLE, { upstream: upstream.url, now: clock.now, logger: cap.logger });
  });
  afterAll(async () => {
    await gw.shutdown(200);
    await upstream.close();
  });

  /**
   * The log is the upstream's (yesterday's, before this table): each line holds the status the upstream
   * answered, whatever the gateway did. Replay counts a ban on that status where the table lets the
   * request through, and on its own answer (429, 403) where it refuses it, as serve does.
   */
  it(
    'bans the same clients at the same requests, from the statuses the log holds',
    async () => {
      const rand = rng(11);
      const log: string[] = [];
      const served: string[] = [];
      let t = T0;
      for (let i = 0; i < 400; i++) {
        t += rand() < 0.5 ? 0 : Math.floor(rand() * 6) * 1000;
        clock.set(t);
        const ip = BAN_IPS[Math.floor(rand() * BAN_IPS.length)]!;
        const req = BAN_REQUESTS[Math.floor(rand() * BAN_REQUESTS.length)]!;
        const [method, target] = req.split(' ') as [string, string];
        const status = target === '/auth/sign_in' ? (rand() < 0.7 ? 401 : 302) : target === '/wp-login.php' ? 404 : 200;
        const id = `b${i}`;
        await send(gw.url, {
          method,
          path: target,
          headers: { 'X-Forwarded-For': ip, 'X-Request-Id': id, 'X-Answer': String(status) },
        });
        log.push(`127.0.0.1 - - [${timeLocal(t)}] "${req} HTTP/1.1" ${status} "${ip}"`);
        served.push(verdictOf(await accessLine(lines, id)));
      }
      const replayed: string[] = [];
      const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'replay-bans-')), 'access.log');
      writeFileSync(file, log.join('\n') + '\n');
      const report = await runReplay({
        snapshot: parseConfig(BANS_TABLE, 't.yaml'),
        format: formatNamed(FORMAT),
        sources: [file],
        onDecision: (d) => replayed.push(`${d.kind}${d.rejectedBy === undefined ? '' : ` by ${d.rejectedBy.name}`}`),
      });
      const banned = served.filter((v) => v === 'banned').length;

      expect(banned).toBeGreaterThan(20);
      expect(replayed).toEqual(served);
      const bans = new Map(report.bans.map((b) => [b.name, b]));
      for (const name of ['login-failures', 'scanners', 'hammer', 'past-limit'])
        expect(bans.get(name)!.started, name).toBeGreaterThan(0);
      expect(report.uncounted.banned).toBe(banned);
      // Which ban refused each request: serve's own metric, per ban, against replay's count.
      const metrics = await (await fetch(`${gw.adminUrl}/metrics`)).text();
      for (const b of report.bans) {
        const m = new RegExp(`^rategate_banned_requests_total\\{ban="${b.name}"\\} (\\d+)$`, 'm').exec(metrics);
        expect(b.refused, b.name).toBe(Number(m?.[1] ?? 0));
      }
      expect(report.bans.some((b) => b.refused > 0 && b.name !== 'login-failures')).toBe(true);
      expect(report.inFlight).toEqual([
        { name: 'streaming', limit: '2 in flight per ip', notDecidable: expect.stringMatching(/how long/) },
      ]);
    },
    scaledMs(60_000),
  );

  it('reports a ban on statuses as not decidable from a log without $status', async () => {
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'replay-bans-')), 'access.log');
    writeFileSync(file, `127.0.0.1 [${timeLocal(T0)}] "POST /auth/sign_in HTTP/1.1" "198.51.100.1"\n`);
    const report = await runReplay({
      snapshot: parseConfig(BANS_TABLE, 't.yaml'),
      format: formatNamed('nginx:$remote_addr [$time_local] "$request" "$http_x_forwarded_for"'),
      sources: [file],
    });
    const bans = new Map(report.bans.map((b) => [b.name, b]));
    expect(bans.get('login-failures')!.notDecidable).toMatch(/\$status/);
    expect(bans.get('scanners')!.notDecidable).toMatch(/\$status/);
    // A ban with no `on` counts every request it matches: the log decides it.
    expect(bans.get('hammer')!.notDecidable).toBeUndefined();
  });
});

/** `rategate replay` as a command: its exit codes, stdout's report (text or JSON), --html, standard input, gzip, bad input. */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { cliArgs, runCli } from '../support/process.js';
import { scaledMs } from '../support/speed.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'replay-cli-'));
const LOG =
  Array.from(
    { length: 8 },
    (_, i) => `198.51.100.9 - - [21/Nov/2026:14:00:0${i} +0000] "POST /api/v1/accounts HTTP/1.1" 200 5 "-" "ua"`,
  ).join('\n') + '\n';
const plain = path.join(dir, 'access.log');
const gz = path.join(dir, 'access.log.1');
writeFileSync(plain, LOG + 'junk\n');
writeFileSync(gz, gzipSync(LOG));

describe('rategate replay', () => {
  it('reports on stdout, reads gzip and plain logs as one, and writes the HTML page', async () => {
    const html = path.join(dir, 'report.html');
    const r = await runCli(['replay', '--config', 'config/limits.yaml', gz, plain, '--html', html]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Replayed 16 requests (17 lines, nginx)');
    // The plain log repeats the gzip one's times: read as one log on a clock that never goes back, both count in one window.
    expect(r.stdout).toMatch(
      /sign-up \(5\/30m per ip\)\n\s+counted 16, would have limited 11, distinct keys limited 1/,
    );
    expect(r.stdout).toContain(`${plain}:9: expected`);
    expect(r.stdout).toMatch(/account-access .*\n\s+not decidable from this log/);
    expect(r.stderr).not.toContain('lines/s'); // no progress when stderr is not a terminal
    expect(readFileSync(html, 'utf8')).toMatch(/^<!doctype html>[\s\S]*<svg/);
  });

  it('prints JSON with --json, reads standard input with -', async () => {
    const child = spawn(process.execPath, cliArgs(['replay', '--json', '-']), { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stdin.end(gzipSync(LOG));
    const code = await new Promise((resolve) => child.once('exit', resolve));
    expect(code).toBe(0);
    const report = JSON.parse(out) as {
      requests: number;
      rules: { name: string; limited: number; topKeys: unknown[] }[];
    };
    expect(report.requests).toBe(8);
    expect(report.rules.find((r) => r.name === 'sign-up')).toMatchObject({
      limited: 3,
      topKeys: [{ key: '198.51.100.9', limited: 3 }],
    });
  });

  it('reports bans (replayed on the logged statuses) and in-flight limits (not decidable), in text, JSON and HTML', async () => {
    const config = path.join(dir, 'bans.yaml');
    writeFileSync(
      config,
      `limits:
  - { name: ip-access, match: /api/*, per: ip, limit: 300, period: 5m }
bans:
  - { name: login-failures, match: POST /auth/sign_in, per: ip, on: { status: [401] }, limit: 3, period: 10m, ban: 1h }
concurrency:
  - { name: streaming, match: GET /api/v1/streaming, per: ip, max: 4 }
`,
    );
    const line = (s: number, req: string, status: number) =>
      `198.51.100.9 - - [21/Nov/2026:14:00:0${s} +0000] "${req} HTTP/1.1" ${status} 5 "-" "ua"`;
    const log = path.join(dir, 'bans.log');
    // Three failed sign-ins start the ban; the fourth sign-in (a success) and the timeline are refused by it.
    writeFileSync(
      log,
      [1, 2, 3].map((s) => line(s, 'POST /auth/sign_in', 401)).join('\n') +
        `\n${line(4, 'POST /auth/sign_in', 302)}\n${line(5, 'GET /api/v1/timelines/home', 200)}\n`,
    );
    const html = path.join(dir, 'bans.html');
    const r = await runCli(['replay', '--config', config, log, '--html', html]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('  banned (no rule counted): 2');
    expect(r.stdout).toContain(
      'login-failures (ban: 3 answered 401 in 10m per ip → banned 1h)\n  answers counted 3, bans started 1, distinct keys banned 1, requests refused while banned 2\n  top keys: 198.51.100.9 (1)\n  bans started by hour: 2026-11-21T14h 1',
    );
    expect(r.stdout).toMatch(
      /streaming \(in-flight: 4 in flight per ip\)\n\s+not decidable from this log: an in-flight limit needs how long/,
    );
    const page = readFileSync(html, 'utf8');
    expect(page).toMatch(
      /<section class="rule ban" id="ban-login-failures">[\s\S]*bans started <span class="lim">1<\/span>[\s\S]*198\.51\.100\.9/,
    );
    expect(page).toContain('id="inflight-streaming"');
    const json = await runCli(['replay', '--config', config, '--json', log]);
    const report = JSON.parse(json.stdout) as {
      bans: { name: string; started: number }[];
      inFlight: { name: string }[];
    };
    expect(report.bans).toMatchObject([
      { name: 'login-failures', counted: 3, started: 1, distinctKeysBanned: 1, refused: 2 },
    ]);
    expect(report.inFlight).toMatchObject([{ name: 'streaming' }]);
  });

  // Five processes, one after another: on a loaded 2-core machine, past the 20 s default.
  it(
    'refuses an unknown format, a log_format it cannot read, no log (EX_USAGE), and a missing file (EX_NOINPUT)',
    async () => {
      for (const [args, message, code] of [
        [['replay', '--format', 'apache', plain], /unknown format "apache"/, 64],
        [['replay', '--format', 'nginx:$remote_addr', plain], /no time/, 64],
        [['replay'], /name at least one log/, 64],
        [['replay', path.join(dir, 'missing.log')], /ENOENT|no such file/, 66],
        [['replay', '--top', 'x', plain], /--top/, 64],
      ] as const) {
        const r = await runCli([...args]);
        expect(r.code, args.join(' ')).toBe(code);
        expect(r.stderr).toMatch(message);
      }
    },
    scaledMs(60_000),
  );
});

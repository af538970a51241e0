/** Replay's decisions: the gateway's own, on the log's clock; what the log cannot decide is said, never guessed. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { formatNamed } from '../../src/replay/formats.js';
import { formatReport } from '../../src/replay/report.js';
import { runReplay } from '../../src/replay/run.js';

const TABLE = `clients: { trustedProxies: [10.0.0.0/8] }
exempt: { ips: [192.0.2.99] }
limits:
  - { name: per-account, match: /api/*, per: account, limit: 3, period: 1m }
  - { name: per-ip, match: /api/*, per: ip, limit: 3, period: 1m }
  - { name: app, match: /api/*, per: "header:user-agent", limit: 100, period: 1m }
  - { name: apps-shadow, match: /api/*, per: "header:x-app", limit: 1, period: 1m, shadow: true }
  - { name: sign-up, match: POST /api/v1/accounts, per: ip, limit: 1, period: 1h }
`;

const at = (s: number) =>
  `21/Nov/2026:10:${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')} +0000`;
const XFF_FORMAT = 'nginx:$remote_addr [$time_local] "$request" $status "$http_x_forwarded_for" "$http_user_agent"';
const line = (ip: string, s: number, req: string, xff = '-') => `${ip} [${at(s)}] "${req} HTTP/1.1" 200 "${xff}" "ua"`;

function logFile(lines: string[]): string {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'replay-')), 'access.log');
  writeFileSync(file, lines.join('\n') + '\n');
  return file;
}

describe('replay', () => {
  it('counts and limits per rule on the log clock, behind trusted proxies, and says what it cannot decide', async () => {
    const lines = [
      // Four in one minute from one client (behind the trusted 10.0.0.1): the fourth is limited.
      ...[0, 1, 2, 3].map((s) => line('10.0.0.1', s, 'GET /api/v1/timelines/home', '198.51.100.1')),
      // A minute later the bucket has refilled: allowed.
      line('10.0.0.1', 65, 'GET /api/v1/timelines/home', '198.51.100.1'),
      // An untrusted peer's X-Forwarded-For is not believed: counted under its own address.
      line('203.0.113.5', 70, 'GET /api/v1/notifications', '198.51.100.1'),
      line('192.0.2.99', 71, 'GET /api/v1/notifications'),
      line('203.0.113.6', 72, 'POST /api/v1/accounts'),
      line('203.0.113.6', 73, 'POST /api/v1/accounts'),
      line('203.0.113.6', 74, 'GET /about'),
      'not a line',
    ];
    const snapshot = parseConfig(TABLE, 'table.yaml');
    const rep = await runReplay({ snapshot, format: formatNamed(XFF_FORMAT), sources: [logFile(lines)] });
    const rule = (name: string) => rep.rules.find((r) => r.name === name)!;
    expect(rule('per-ip')).toMatchObject({
      counted: 8,
      limited: 1,
      distinctKeysLimited: 1,
      topKeys: [{ key: '198.51.100.1', limited: 1 }],
    });
    expect(rule('sign-up')).toMatchObject({ counted: 2, limited: 1, topKeys: [{ key: '203.0.113.6', limited: 1 }] });
    expect(rule('app')).toMatchObject({ counted: 8, limited: 0 });
    expect(rule('per-account').notDecidable).toMatch(/account/);
    expect(rule('apps-shadow').notDecidable).toMatch(/x-app/);
    expect(rule('per-account').counted).toBe(0);
    expect(rep.limited).toBe(2);
    expect(rep.uncounted).toEqual({ exempt: 1, unmatched: 1 });
    expect(rep.badLines).toEqual({
      count: 1,
      first: [{ source: expect.stringMatching(/access.log$/), line: 11, why: expect.any(String) }],
    });
    expect(rule('per-ip').hours).toEqual([{ hour: '2026-11-21T10:00:00.000Z', counted: 8, limited: 1 }]);
    const text = formatReport(rep);
    expect(text).toMatch(/per-account .*\n\s+not decidable from this log: needs the account/);
    expect(text).toContain('/access.log:11:');
  });

  it('reports a shadow rule as shadow: it would have limited, and never rejects', async () => {
    const snapshot = parseConfig(
      `limits:\n  - { name: watch, match: /api/*, per: ip, limit: 1, period: 1m, shadow: true }\n`,
      't.yaml',
    );
    const lines = [0, 1, 2].map((s) => line('192.0.2.1', s, 'GET /api/v1/x'));
    const rep = await runReplay({ snapshot, format: formatNamed(XFF_FORMAT), sources: [logFile(lines)] });
    expect(rep.rules[0]).toMatchObject({ shadow: true, counted: 3, limited: 2 });
    expect(rep.limited).toBe(0);
    expect(formatReport(rep)).toContain('[shadow: would have limited, never rejects]');
  });
});

describe('replay of hostile and partial logs', () => {
  it("escapes what a log line says in the HTML page (a bad line's request is shown, never run)", async () => {
    const { reportPage } = await import('../../src/replay/html.js');
    const snapshot = parseConfig(`limits:\n  - { name: r, match: /api/*, per: ip, limit: 1, period: 1m }\n`, 't.yaml');
    const hostile = `192.0.2.1 [${at(0)}] "<script>alert(1)</script> /x HTTP/1.1" 200 "-" "ua"`;
    const rep = await runReplay({ snapshot, format: formatNamed(XFF_FORMAT), sources: [logFile([hostile])] });
    expect(rep.badLines.first[0]!.why).toContain('<script>');
    const page = reportPage(rep);
    expect(page).not.toContain('<script>');
    expect(page).toContain('&#60;script&#62;');
  });

  it("counts rategate's own log lines without a client address (log.client off or digest) as skipped, not as some client", async () => {
    const snapshot = parseConfig(`limits:\n  - { name: r, match: /api/*, per: ip, limit: 1, period: 1m }\n`, 't.yaml');
    const rec = (client?: string) =>
      JSON.stringify({
        level: 30,
        time: 1795460405500,
        method: 'GET',
        path: '/api/v1/x',
        status: 200,
        ms: 1,
        msg: 'request',
        ...(client ? { client } : {}),
      });
    const rep = await runReplay({
      snapshot,
      format: formatNamed('rategate'),
      sources: [logFile([rec(), rec('3f2a9c0d11aa22bb'), rec('192.0.2.7'), rec('192.0.2.7')])],
    });
    expect(rep.noClientAddress).toBe(2);
    expect(rep.rules[0]).toMatchObject({ counted: 2, limited: 1 });
  });
});

describe('replayed bans', () => {
  const BANS = `clients: { trustedProxies: [10.0.0.0/8] }
exempt: { ips: [192.0.2.99] }
bans:
  - { name: by-account, match: /api/*, per: account, on: { status: [401] }, limit: 1, period: 1m, ban: 1h }
  - { name: by-ua, match: /api/*, per: "header:user-agent", limit: 100, period: 1m, ban: 1h }
  - { name: denied, match: /api/*, per: ip, on: { status: [401] }, limit: 2, period: 1m, ban: 30s }
`;

  it('says which bans the log cannot decide, never bans an exempt client, and ends a ban on the log clock', async () => {
    const lines = [
      // Two 401s start the ban; the next request, 10 s later, is refused; after 30 s it is over.
      line('10.0.0.1', 0, 'GET /api/v1/timelines/home', '198.51.100.1').replace('" 200 "', '" 401 "'),
      line('10.0.0.1', 1, 'GET /api/v1/timelines/home', '198.51.100.1').replace('" 200 "', '" 401 "'),
      line('10.0.0.1', 11, 'GET /api/v1/timelines/home', '198.51.100.1'),
      line('10.0.0.1', 32, 'GET /api/v1/timelines/home', '198.51.100.1'),
      // An exempt client's 401s count for no ban.
      ...[40, 41, 42].map((s) => line('192.0.2.99', s, 'GET /api/v1/timelines/home').replace('" 200 "', '" 401 "')),
      line('192.0.2.99', 43, 'GET /api/v1/timelines/home'),
    ];
    const kinds: string[] = [];
    const report = await runReplay({
      snapshot: parseConfig(BANS, 't.yaml'),
      format: formatNamed(XFF_FORMAT),
      sources: [logFile(lines)],
      onDecision: (d) => kinds.push(d.kind),
    });
    // No limit matches (the table has bans only): let through as `unmatched`, the exempt client's fourth included.
    expect(kinds).toEqual([
      'unmatched',
      'unmatched',
      'banned',
      'unmatched',
      'unmatched',
      'unmatched',
      'unmatched',
      'unmatched',
    ]);
    const bans = new Map(report.bans.map((b) => [b.name, b]));
    expect(bans.get('by-account')!.notDecidable).toMatch(/account/);
    // The format logs $http_user_agent: a ban on it is decidable.
    expect(bans.get('by-ua')!.notDecidable).toBeUndefined();
    expect(bans.get('denied')).toMatchObject({
      counted: 2,
      started: 1,
      refused: 1,
      topKeys: [{ key: '198.51.100.1', bans: 1 }],
    });
    expect(formatReport(report)).toMatch(/by-account \(ban: .*\)\n {2}not decidable from this log: needs the account/);
  });
});

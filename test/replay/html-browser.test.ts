/**
 * The HTML report in a real browser (Debian's chromium): one page that fetches nothing, one chart per
 * rule the log decides, the undecidable ones said so, the top keys in a table, a ban's section with the
 * bans it started, an in-flight limit said undecidable. A screenshot is kept.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { formatNamed } from '../../src/replay/formats.js';
import { reportPage } from '../../src/replay/html.js';
import { runReplay } from '../../src/replay/run.js';
import { checkStaticPage, skipBrowser } from '../support/browser.js';
import { SEED_TABLE } from '../support/seed-table.js';
import { scaledMs } from '../support/speed.js';

const BANS = `bans:
  - { name: scanners, match: GET /wp-login.php, per: ip, on: { status: [404] }, limit: 3, period: 10m, ban: 1h }
concurrency:
  - { name: streaming, match: GET /api/v1/streaming, per: ip, max: 4 }
`;

function log(): string {
  const lines: string[] = [];
  for (let s = 0; s < 6 * 3600; s += 3) {
    const t = `21/Nov/2026:${String(Math.floor(s / 3600)).padStart(2, '0')}:${String(Math.floor(s / 60) % 60).padStart(2, '0')}:${String(s % 60).padStart(2, '0')} +0000`;
    lines.push(`10.0.${s % 7}.${s % 200} - - [${t}] "GET /api/v1/timelines/home HTTP/1.1" 200 5 "-" "ua"`);
    // A flood at 02:00–02:20, and a sign-up wave at 04:00–04:10.
    if (s >= 7200 && s < 8400)
      for (let i = 0; i < 6; i++)
        lines.push(`203.0.113.50 - - [${t}] "GET /api/v1/timelines/public HTTP/1.1" 200 5 "-" "ua"`);
    if (s >= 14400 && s < 15000)
      lines.push(`198.51.100.${s % 9} - - [${t}] "POST /api/v1/accounts HTTP/1.1" 200 5 "-" "ua"`);
    // A scanner at 05:00–05:01: its 404s start the ban.
    if (s >= 18000 && s < 18060) lines.push(`192.0.2.200 - - [${t}] "GET /wp-login.php HTTP/1.1" 404 5 "-" "ua"`);
  }
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'replay-html-')), 'access.log');
  writeFileSync(file, lines.join('\n') + '\nbad line\n');
  return file;
}

describe.skipIf(skipBrowser('the replay report test'))('replay --html in chromium', () => {
  it(
    'draws a chart per decided rule, says which rules the log cannot decide, and fetches nothing',
    async () => {
      const snapshot = parseConfig(`${SEED_TABLE}\n${BANS}`, 'config/limits.yaml');
      const report = await runReplay({ snapshot, format: formatNamed('nginx'), sources: [log()] });
      const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'replay-html-')), 'report.html');
      writeFileSync(file, reportPage(report));
      await checkStaticPage(file, 'replay-report.png', async (page) => {
        const decided = report.rules.filter((r) => r.notDecidable === undefined).map((r) => r.name);
        expect(decided).toEqual(['ip-access', 'sign-up']);
        expect(await page.locator('section.rule svg').count()).toBe(decided.length);
        for (const name of decided)
          await expect(page.locator(`#rule-${name} svg rect`).count()).resolves.toBeGreaterThan(0);
        expect(await page.locator('#rule-account-access').innerText()).toContain('Not decidable from this log');
        expect(await page.locator('#rule-ip-access').innerText()).toContain('203.0.113.50');
        expect(await page.locator('body').innerText()).toContain(`access.log:${report.lines}: expected`);
        expect(await page.locator('a[href="#ban-scanners"]').count()).toBe(1);
        const ban = await page.locator('#ban-scanners').innerText();
        expect(ban).toContain('bans started 1');
        expect(ban).toContain('2026-11-21T05h');
        expect(ban).toContain('192.0.2.200');
        expect(await page.locator('#inflight-streaming').innerText()).toContain('Not decidable from this log');
      });
    },
    scaledMs(60_000),
  );
});

/**
 * Issue 32's "done when": the generated day (scripts/gen-access-log.ts, its default 1.2 M lines) replayed
 * whole names the flood and the sign-up wave under the rules that would have limited them, and every
 * request of the flood's address and of the wave's /24 — the whole day of them — sent through `serve` at
 * its logged time (a fake clock) gets replay's verdict, so the rules' counts agree exactly. The seed
 * table's decidable rules are all `per: ip`: an address's verdicts depend on its own requests only, so
 * serve needs those addresses' requests alone (checked below, with no other address limited by replay).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { formatNamed } from '../../src/replay/formats.js';
import type { LogRecord } from '../../src/replay/record.js';
import type { ReplayReport } from '../../src/replay/report.js';
import { reportPage } from '../../src/replay/html.js';
import { runReplay } from '../../src/replay/run.js';
import { checkStaticPage, skipBrowser } from '../support/browser.js';
import { FakeClock } from '../support/clock.js';
import {
  accessLine,
  capturingLogger,
  SEED_TABLE,
  startTestGateway,
  type LogLine,
  type TestGateway,
} from '../support/gateway.js';
import { send } from '../support/http.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { scaledMs } from '../support/speed.js';

const FLOOD_IP = '203.0.113.50';
const WAVE_NET = '198.51.100.';
const dir = mkdtempSync(path.join(os.tmpdir(), 'replay-day-'));
const day = path.join(dir, 'day.log');
const verdict = (d: { kind: string; rejectedBy?: { name: string } | undefined }) =>
  `${d.kind}${d.rejectedBy === undefined ? '' : ` by ${d.rejectedBy.name}`}`;

describe('a generated day of 1.2 M lines', () => {
  let upstream: RecordingUpstream;
  let gw: TestGateway;
  let lines: LogLine[];
  const clock = new FakeClock();
  let report: ReplayReport;
  /** The flood's and the wave's requests, in log order, with replay's verdict of each. */
  const watched: { r: LogRecord; verdict: string }[] = [];
  /** Replay's verdicts "limited …" for any other address (there must be none). */
  const othersLimited: string[] = [];

  beforeAll(async () => {
    execFileSync(process.execPath, ['--import', 'tsx', 'scripts/gen-access-log.ts', '--out', day]);
    const snapshot = parseConfig(SEED_TABLE, 'seed');
    report = await runReplay({
      snapshot,
      format: formatNamed('nginx'),
      sources: [day],
      onDecision: (d, r) => {
        if (r.remoteAddr === FLOOD_IP || r.remoteAddr.startsWith(WAVE_NET)) watched.push({ r, verdict: verdict(d) });
        else if (d.kind === 'limited') othersLimited.push(`${r.remoteAddr} ${verdict(d)}`);
      },
    });
    rmSync(day); // 170 MB
    upstream = await startRecordingUpstream();
    const cap = capturingLogger();
    lines = cap.lines;
    gw = await startTestGateway(SEED_TABLE, { upstream: upstream.url, now: clock.now, logger: cap.logger });
  }, scaledMs(300_000));
  afterAll(async () => {
    await gw?.shutdown(200);
    await upstream?.close();
  });

  it('names the flood and the wave under the rules that would have limited them', () => {
    expect(report.lines).toBeGreaterThanOrEqual(1_000_000);
    const rule = (name: string) => report.rules.find((r) => r.name === name)!;
    expect(rule('ip-access').topKeys[0]!.key).toBe(FLOOD_IP);
    expect(
      rule('ip-access')
        .hours.filter((h) => h.limited > 0)
        .map((h) => h.hour.slice(11, 13)),
    ).toEqual(['03']);
    expect(rule('sign-up').topKeys.every((k) => k.key.startsWith(WAVE_NET))).toBe(true);
    expect(
      rule('sign-up')
        .hours.filter((h) => h.limited > 0)
        .map((h) => h.hour.slice(11, 13)),
    ).toEqual(['14']);
    expect(rule('account-access').notDecidable).toMatch(/account/);
    expect(report.badLines.count).toBe(4);
  });

  it.skipIf(skipBrowser("the generated day's HTML report"))(
    'writes an HTML report that opens in chromium with one chart per rule the log decides',
    async () => {
      const file = path.join(dir, 'report.html');
      writeFileSync(file, reportPage(report));
      await checkStaticPage(file, 'replay-generated-day.png', async (page) => {
        expect(await page.locator('section.rule svg').count()).toBe(2);
        // 24 hours on each chart's axis; the flood's bar at 03h, the wave's at 14h.
        expect(await page.locator('#rule-ip-access svg text', { hasText: /^\d\dh$/ }).count()).toBe(12);
        expect(await page.locator('#rule-ip-access svg rect title').allTextContents()).toEqual([
          '2026-11-21T03h: 3,600 limited',
        ]);
        expect(await page.locator('#rule-sign-up svg rect title').allTextContents()).toEqual([
          `2026-11-21T14h: ${report.rules.find((r) => r.name === 'sign-up')!.limited} limited`,
        ]);
      });
    },
    scaledMs(60_000),
  );

  it(
    "decides every request of the flood's and the wave's addresses as serve does, so the counts agree exactly",
    async () => {
      // The premise: every rule replay drives keys on the address alone.
      const snapshot = parseConfig(SEED_TABLE, 'seed');
      const decided = report.rules.filter((r) => r.notDecidable === undefined).map((r) => r.name);
      for (const name of decided)
        expect(snapshot.rules.find((r) => r.name === name)!.key.parts.map((p) => p.kind)).toEqual(['ip']);
      expect(othersLimited).toEqual([]);
      expect(watched.length).toBeGreaterThan(5_000);
      const served: string[] = [];
      for (let i = 0; i < watched.length; i++) {
        const { r } = watched[i]!;
        clock.set(r.time);
        const id = `d${i}`;
        await send(gw.url, {
          method: r.method,
          path: r.target,
          headers: { 'X-Forwarded-For': r.remoteAddr, 'X-Request-Id': id },
        });
        served.push(verdictOf(await accessLine(lines, id, 10_000)));
      }
      expect(served).toEqual(watched.map((w) => w.verdict));
      // No other address was limited: the rules' whole-day counts are the ones serve just gave.
      for (const name of decided) {
        const limited = served.filter((v) => v === `limited by ${name}`).length;
        expect(report.rules.find((r) => r.name === name)!.limited, name).toBe(limited);
        expect(limited, name).toBeGreaterThan(0);
      }
      expect(report.limited).toBe(served.filter((v) => v.startsWith('limited')).length);
    },
    scaledMs(600_000),
  );
});

function verdictOf(line: LogLine): string {
  return `${String(line.decision)}${line.rule === undefined ? '' : ` by ${String(line.rule)}`}`;
}

/**
 * Issue 40: replay decides little of Mastodon's table from a combined log, because every `/api/*` rule
 * reads the account. `--assume anonymous` (a request whose line shows no credential was unauthenticated)
 * decides the IP-keyed ones, shown as an assumption; account-keyed rules stay not decidable; requests
 * matched only by rules the log cannot decide are counted apart from unmatched ones. The flood of the
 * generated day (03:00, one address) is then named under `unauthenticated-api`, and serve, given the
 * same requests without a credential, gives the same verdicts.
 */
import { execFile, execFileSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/load.js';
import type { Snapshot } from '../../src/config/types.js';
import { formatNamed } from '../../src/replay/formats.js';
import type { LogRecord } from '../../src/replay/record.js';
import { reportPage } from '../../src/replay/html.js';
import { formatReport, type ReplayReport } from '../../src/replay/report.js';
import { runReplay } from '../../src/replay/run.js';
import { FakeClock } from '../support/clock.js';
import { accessLine, capturingLogger, startTestGateway, type LogLine, type TestGateway } from '../support/gateway.js';
import { send } from '../support/http.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';
import { scaledMs } from '../support/speed.js';

const FLOOD_IP = '203.0.113.50';
const MASTODON = 'config/examples/mastodon.yaml';
const dir = mkdtempSync(path.join(os.tmpdir(), 'replay-assume-'));
const day = path.join(dir, 'day.log');
const TOKEN_LINES = 7;

describe('replay of a generated day under the Mastodon table', () => {
  let snapshot: Snapshot;
  let plain: ReplayReport;
  let assumed: ReplayReport;
  /** The flood's requests in log order, with the verdict replay gave each under --assume anonymous. */
  const flood: { r: LogRecord; verdict: string }[] = [];

  beforeAll(async () => {
    execFileSync(process.execPath, ['--import', 'tsx', 'scripts/gen-access-log.ts', '--lines', '40000', '--out', day]);
    // Lines that show a credential (Doorkeeper reads `access_token` from the query): the assumption does not hold for them.
    let extra = '';
    for (let i = 0; i < TOKEN_LINES; i++)
      extra += `192.0.2.${i + 1} - - [21/Nov/2026:23:59:59 +0000] "GET /api/v1/timelines/home?access_token=tok${i} HTTP/1.1" 200 10 "-" "app"\n`;
    appendFileSync(day, extra);
    snapshot = await loadConfigFile(MASTODON);
    const format = formatNamed('nginx');
    plain = await runReplay({ snapshot, format, sources: [day] });
    assumed = await runReplay({
      snapshot,
      format,
      sources: [day],
      assume: new Set(['anonymous']),
      onDecision: (d, r) => {
        if (r.remoteAddr === FLOOD_IP)
          flood.push({ r, verdict: `${d.kind}${d.rejectedBy === undefined ? '' : ` by ${d.rejectedBy.name}`}` });
      },
    });
  }, scaledMs(120_000));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const rule = (rep: ReplayReport, name: string) => rep.rules.find((r) => r.name === name)!;

  it('without the assumption, every /api/* rule is not decidable, and says what would decide the IP-keyed one', () => {
    for (const name of ['authenticated-api', 'per-token-api', 'unauthenticated-api'])
      expect(rule(plain, name).notDecidable, name).toBeDefined();
    expect(rule(plain, 'unauthenticated-api').notDecidable).toMatch(/--assume anonymous/);
    expect(rule(plain, 'authenticated-api').notDecidable).not.toMatch(/--assume/);
    expect(plain.assumptions).toEqual([]);
    // The /api requests are matched by rules the log cannot decide: counted apart from the unmatched.
    expect(plain.uncounted.undecidable).toBeGreaterThan(20_000);
  });

  it('under --assume anonymous, names the 03:00 flood under unauthenticated-api, shown as an assumption', () => {
    const r = rule(assumed, 'unauthenticated-api');
    expect(r.notDecidable).toBeUndefined();
    expect(r.assumed).toEqual(['anonymous']);
    expect(r.topKeys[0]!.key).toBe(FLOOD_IP);
    expect(r.distinctKeysLimited).toBe(1);
    expect(r.hours.filter((h) => h.limited > 0).map((h) => h.hour.slice(11, 13))).toEqual(['03']);
    // 3 a second for 30 minutes against 300 per 5 minutes: 6 windows of 900, 600 over in each.
    expect(r.limited).toBe(3_600);
    expect(assumed.assumptions.map((a) => a.name)).toEqual(['anonymous']);
    const text = formatReport(assumed);
    expect(text).toContain(
      'assumed (--assume anonymous): a request whose log line shows no credential was unauthenticated',
    );
    expect(text).toMatch(/unauthenticated-api .*\n {2}decided assuming: anonymous\n/);
  });

  it('shows the assumption in the HTML report too, above the rules and beside the rule it decided', () => {
    const page = reportPage(assumed);
    expect(page).toContain('Assumed where the log is silent: <b>anonymous</b>');
    expect(page).toMatch(
      /id="rule-unauthenticated-api"><h2>unauthenticated-api<span class="tag assumed">assuming anonymous<\/span>/,
    );
    expect(page).toContain('matched only by rules not decidable from this log (not counted)');
    expect(reportPage(plain)).not.toContain('Assumed where');
  });

  it('keeps account- and token-keyed rules not decidable, and reports the lines that showed a credential', () => {
    for (const name of ['authenticated-api', 'per-token-api', 'api-media', 'api-delete', 'authenticated-paging'])
      expect(rule(assumed, name).notDecidable, name).toBeDefined();
    // `when.query` also reads a form body: decided only with no-body assumed as well.
    expect(rule(assumed, 'unauthenticated-paging').notDecidable).toMatch(/no-body/);
    expect(assumed.credentialShown).toBe(TOKEN_LINES);
    expect(formatReport(assumed)).toMatch(/showed a credential in the log all the same .*: 7/);
  });

  it('counts the requests no driven rule counted apart: undecidable beside unmatched', () => {
    // The web pages (/@alice/…, /packs/…) are matched by the paging rules' `/*` only, which stay undecidable.
    expect(assumed.uncounted.undecidable).toBeGreaterThan(0);
    const uncounted = Object.values(assumed.uncounted).reduce((a, b) => a + b, 0);
    const counted = rule(assumed, 'unauthenticated-api').counted;
    expect(counted + uncounted).toBeLessThanOrEqual(assumed.requests);
    expect(formatReport(assumed)).toContain('matched only by rules not decidable from this log (not counted)');
  });

  describe('serve agrees', () => {
    let upstream: RecordingUpstream;
    let gw: TestGateway;
    let lines: LogLine[];
    const clock = new FakeClock();
    beforeAll(async () => {
      upstream = await startRecordingUpstream();
      const cap = capturingLogger();
      lines = cap.lines;
      gw = await startTestGateway(readFileSync(MASTODON, 'utf8'), {
        upstream: upstream.url,
        now: clock.now,
        logger: cap.logger,
      });
    });
    afterAll(async () => {
      await gw?.shutdown(200);
      await upstream?.close();
    });

    it(
      "gives the flood's requests, sent without a credential, replay's verdicts",
      async () => {
        // Past the first window's 300 and into the second: allowed, then limited, then allowed again.
        const watched = flood.slice(0, 1_000);
        expect(watched.filter((w) => w.verdict === 'limited by unauthenticated-api').length).toBeGreaterThan(300);
        const served: string[] = [];
        for (let i = 0; i < watched.length; i++) {
          const { r } = watched[i]!;
          clock.set(r.time);
          const id = `f${i}`;
          // The gateway sees the test's loopback peer, a trusted proxy in this table: the client is named by X-Forwarded-For.
          await send(gw.url, {
            method: r.method,
            path: r.target,
            headers: { 'X-Forwarded-For': r.remoteAddr, 'X-Request-Id': id },
          });
          const line = await accessLine(lines, id, 10_000);
          served.push(`${String(line.decision)}${line.rule === undefined ? '' : ` by ${String(line.rule)}`}`);
        }
        expect(served).toEqual(watched.map((w) => w.verdict));
      },
      scaledMs(300_000),
    );
  });
});

describe('rategate replay --assume', () => {
  const run = promisify(execFile);
  it(
    'refuses an assumption it does not know, naming the known ones',
    async () => {
      const err = await run(
        process.execPath,
        ['--import', 'tsx', 'src/cli/index.ts', 'replay', '--config', MASTODON, '--assume', 'everyone-honest', '-'],
        {
          timeout: 60_000,
        },
      ).catch((e: { code: number; stderr: string }) => e);
      expect((err as { code: number }).code).not.toBe(0);
      expect((err as { stderr: string }).stderr).toMatch(
        /--assume: unknown assumption "everyone-honest" \(known: anonymous, no-body\)/,
      );
    },
    scaledMs(90_000),
  );
});

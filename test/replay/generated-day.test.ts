/**
 * The generated day (scripts/gen-access-log.ts) names the flood and the sign-up wave under the seed table,
 * and its flood hour and wave half-hour, sent through `serve` at their logged times (a fake clock),
 * get exactly replay's verdicts request by request. (The whole 1.2 M-line day goes through replay in
 * the bench; sending it all over HTTP would take the test minutes.)
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { formatNamed } from '../../src/replay/formats.js';
import type { LogRecord } from '../../src/replay/record.js';
import { runReplay } from '../../src/replay/run.js';
import { FakeClock } from '../support/clock.js';
import { accessLine, capturingLogger, SEED_TABLE, startTestGateway, type LogLine, type TestGateway } from '../support/gateway.js';
import { send } from '../support/http.js';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'replay-day-'));
const day = path.join(dir, 'day.log');

describe('a generated day', () => {
  let upstream: RecordingUpstream;
  let gw: TestGateway;
  let lines: LogLine[];
  const clock = new FakeClock();

  beforeAll(async () => {
    execFileSync(process.execPath, ['--import', 'tsx', 'scripts/gen-access-log.ts', '--lines', '100000', '--out', day]);
    upstream = await startRecordingUpstream();
    const cap = capturingLogger();
    lines = cap.lines;
    gw = await startTestGateway(SEED_TABLE, { upstream: upstream.url, now: clock.now, logger: cap.logger });
  }, 60_000);
  afterAll(async () => {
    await gw?.shutdown(200);
    await upstream?.close();
  });

  it('names the flood and the wave under the rules that would have limited them', async () => {
    const report = await runReplay({ snapshot: parseConfig(SEED_TABLE, 'seed'), format: formatNamed('nginx'), sources: [day] });
    const rule = (name: string) => report.rules.find((r) => r.name === name)!;
    expect(rule('ip-access').topKeys[0]!.key).toBe('203.0.113.50');
    expect(
      rule('ip-access')
        .hours.filter((h) => h.limited > 0)
        .map((h) => h.hour.slice(11, 13)),
    ).toEqual(['03']);
    expect(rule('sign-up').topKeys.every((k) => k.key.startsWith('198.51.100.'))).toBe(true);
    expect(
      rule('sign-up')
        .hours.filter((h) => h.limited > 0)
        .map((h) => h.hour.slice(11, 13)),
    ).toEqual(['14']);
    expect(rule('account-access').notDecidable).toMatch(/account/);
    expect(report.badLines.count).toBe(4);
  });

  it('decides the flood and the wave request by request as serve does', async () => {
    const format = formatNamed('nginx');
    const all = readFileSync(day, 'utf8').split('\n');
    const window = (from: string, to: string) =>
      all.filter(
        (l) => l.includes('[21/Nov/2026:') && l.slice(l.indexOf(':') + 1, l.indexOf(':') + 9) >= from && l.slice(l.indexOf(':') + 1, l.indexOf(':') + 9) < to,
      );
    const picked = [...window('03:00:00', '03:08:00'), ...window('14:00:00', '14:30:00')];
    const sub = path.join(dir, 'windows.log');
    writeFileSync(sub, picked.join('\n') + '\n');
    const replayed: string[] = [];
    const report = await runReplay({
      snapshot: parseConfig(SEED_TABLE, 'seed'),
      format,
      sources: [sub],
      onDecision: (d) => replayed.push(`${d.kind}${d.rejectedBy === undefined ? '' : ` by ${d.rejectedBy.name}`}`),
    });
    const served: string[] = [];
    for (let i = 0; i < picked.length; i++) {
      const r = format.parse(picked[i]!) as LogRecord;
      clock.set(r.time);
      const id = `d${i}`;
      await send(gw.url, { method: r.method, path: r.target, headers: { 'X-Forwarded-For': r.remoteAddr, 'X-Request-Id': id } });
      served.push(verdictOf(await accessLine(lines, id, 10_000)));
    }
    expect(replayed).toEqual(served);
    const limited = served.filter((v) => v.startsWith('limited'));
    expect(new Set(limited)).toEqual(new Set(['limited by ip-access', 'limited by sign-up']));
    expect(report.limited).toBe(limited.length);
  }, 240_000);
});

function verdictOf(line: LogLine): string {
  return `${String(line.decision)}${line.rule === undefined ? '' : ` by ${String(line.rule)}`}`;
}

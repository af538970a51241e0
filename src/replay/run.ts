/**
 * @module One replay run: every line of every log parsed by its format and decided in order, bad lines
 * counted, the progress on stderr when it is a terminal (lines per second and the log time reached).
 */
import type { Snapshot } from '../config/types.js';
import type { Decision } from '../pipeline/decision.js';
import type { Assumption } from './decidable.js';
import { Replayer } from './engine.js';
import { logLines } from './lines.js';
import type { LogFormat, LogRecord } from './record.js';
import { buildReport, type ReplayReport } from './report.js';

export interface RunOptions {
  readonly snapshot: Snapshot;
  readonly format: LogFormat;
  readonly sources: readonly string[];
  /** Where progress goes (a terminal's stderr), or null for none. */
  readonly progress?: NodeJS.WriteStream | null;
  readonly top?: number;
  /** Told each request's decision, with its record, in log order. */
  readonly onDecision?: (d: Decision, r: LogRecord) => void;
  /** What to assume where the log is silent (`--assume`). */
  readonly assume?: ReadonlySet<Assumption>;
}

const PROGRESS_MS = 250;

export async function runReplay(o: RunOptions): Promise<ReplayReport> {
  const replayer = new Replayer(o.snapshot, o.format, o.onDecision, o.assume);
  const parse = o.format.parse;
  const started = performance.now();
  let lines = 0;
  let shownAt = started;
  try {
    for await (const batch of logLines(o.sources)) {
      const { source, first } = batch;
      for (let i = 0; i < batch.lines.length; i++) {
        const line = batch.lines[i]!;
        if (line === '') continue;
        lines++;
        const rec = parse(line);
        if (typeof rec === 'string') replayer.log.badLine(source, first + i, rec);
        else {
          const p = replayer.replay(rec);
          if (p !== undefined) await p;
        }
      }
      if (o.progress != null && performance.now() - shownAt >= PROGRESS_MS) {
        shownAt = performance.now();
        showProgress(o.progress, lines, shownAt - started, replayer.log.last);
      }
    }
  } finally {
    if (o.progress != null) o.progress.write('\r\x1b[K');
    await replayer.close();
  }
  const seconds = (performance.now() - started) / 1000;
  return buildReport(replayer, { format: o.format.name, sources: o.sources, lines, seconds }, o.top);
}

function showProgress(out: NodeJS.WriteStream, lines: number, ms: number, logTime: number): void {
  const rate = Math.round(lines / (ms / 1000));
  const at = Number.isFinite(logTime) ? new Date(logTime).toISOString().slice(0, 19).replace('T', ' ') : '-';
  out.write(`\r\x1b[K${lines.toLocaleString('en-US')} lines  ${rate.toLocaleString('en-US')} lines/s  log time ${at}`);
}

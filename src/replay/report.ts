/**
 * @module Replay's report as data (what `--json` prints and the HTML page draws) and as text (stdout):
 * per rule, counted, would-be-limited, distinct keys limited, the top keys and the hours; the rules the
 * log cannot decide, with why; the log's bad lines by place.
 */
import { formatDuration } from '../config/fields/duration.js';
import { perLabel } from '../config/describe.js';
import { compileGuardRules, type CompiledBan } from '../guard/rules.js';
import type { Replayer } from './engine.js';
import { ASSUMPTIONS, IN_FLIGHT_REASON, assumedBy } from './decidable.js';
import { HOUR_MS, type BadLine, type BanTally } from './tally.js';

export interface RuleReport {
  readonly name: string;
  /** `limit/period per KEY`, as `rategate check` writes it. */
  readonly limit: string;
  readonly shadow: boolean;
  /** Why the log cannot decide it; absent: it was driven. */
  readonly notDecidable?: string;
  /** The assumptions (`--assume`) it was decided under; absent: none was needed. */
  readonly assumed?: readonly string[];
  readonly counted: number;
  /** Requests it would have limited (a shadow rule: would have, it never rejects). */
  readonly limited: number;
  readonly distinctKeysLimited: number;
  readonly topKeys: readonly { key: string; limited: number }[];
  /** One entry per hour of the log, from its first hour to its last. */
  readonly hours: readonly { hour: string; counted: number; limited: number }[];
}

export interface BanReport {
  readonly name: string;
  /** `limit [statuses] in period per KEY → ban for`. */
  readonly ban: string;
  /** Why the log cannot decide it; absent: it was driven. */
  readonly notDecidable?: string;
  /** Answers counted towards it (it matched, and its `on` took the status). */
  readonly counted: number;
  readonly started: number;
  /** Requests a live ban of this name would have refused (403). */
  readonly refused: number;
  readonly distinctKeysBanned: number;
  readonly topKeys: readonly { key: string; bans: number }[];
  /** One entry per hour of the log: bans started. */
  readonly hours: readonly { hour: string; started: number }[];
}

/** An in-flight limit: never decidable from a log (it needs which requests overlapped). */
export interface InFlightReport {
  readonly name: string;
  readonly limit: string;
  readonly notDecidable: string;
}

export interface ReplayReport {
  readonly config: string;
  readonly format: string;
  readonly sources: readonly string[];
  readonly lines: number;
  /** Records driven (lines read, less bad ones). */
  readonly requests: number;
  readonly from: string | null;
  readonly to: string | null;
  readonly badLines: { readonly count: number; readonly first: readonly BadLine[] };
  readonly noClientAddress: number;
  /** Requests an enforced rule would have answered 429. */
  readonly limited: number;
  /**
   * Requests no rule counted, by why: unmatched (no rule's route), undecidable (matched only by rules the
   * log cannot decide), exempt, blocked, rejected.
   */
  readonly uncounted: Readonly<Record<string, number>>;
  /** What replay was told to assume where the log is silent, each with what it means. */
  readonly assumptions: readonly { readonly name: string; readonly meaning: string }[];
  /** Under `anonymous`: requests whose line showed a credential all the same (decided without an account). */
  readonly credentialShown: number;
  readonly rules: readonly RuleReport[];
  /** The table's bans, driven through the gateway's guard where the log decides them. */
  readonly bans: readonly BanReport[];
  readonly inFlight: readonly InFlightReport[];
  /** Lines per second of the run (wall time), for the record. */
  readonly linesPerSecond: number;
}

const iso = (ms: number) => new Date(ms).toISOString();

/** The hours of the log, first to last (epoch ms / HOUR_MS), or none. */
function hoursOf(r: Replayer): number[] {
  const { first, last } = r.log;
  if (first > last) return [];
  const out: number[] = [];
  for (let h = Math.floor(first / HOUR_MS); h <= Math.floor(last / HOUR_MS); h++) out.push(h);
  return out;
}

function banReport(r: Replayer, t: BanTally, ban: CompiledBan, top: number): BanReport {
  const on = ban.on === null ? '' : ` answered ${[...ban.on].join('/')}`;
  const why = r.undecidableBans.get(t.name);
  return {
    name: t.name,
    ban: `${ban.limit}${on} in ${formatDuration(ban.periodMs)} per ${perLabel(ban.rule)} → banned ${formatDuration(ban.banMs)}`,
    ...(why === undefined ? {} : { notDecidable: why }),
    counted: t.counted,
    started: t.started,
    refused: t.refused,
    distinctKeysBanned: t.keys.size,
    topKeys: t.topKeys(top),
    hours: hoursOf(r).map((h) => ({ hour: iso(h * HOUR_MS), started: t.hours.get(h) ?? 0 })),
  };
}

export function buildReport(
  r: Replayer,
  meta: { format: string; sources: readonly string[]; lines: number; seconds: number },
  top = 10,
): ReplayReport {
  const log = r.log;
  const guardRules = compileGuardRules(r.snapshot.config);
  const span = log.first <= log.last ? [Math.floor(log.first / HOUR_MS), Math.floor(log.last / HOUR_MS)] : null;
  const rules = r.rules.map((t, i): RuleReport => {
    const rule = r.snapshot.rules[i]!;
    const hours: { hour: string; counted: number; limited: number }[] = [];
    if (span !== null)
      for (let h = span[0]!; h <= span[1]!; h++) {
        const c = t.hours.get(h);
        hours.push({ hour: iso(h * HOUR_MS), counted: c?.[0] ?? 0, limited: c?.[1] ?? 0 });
      }
    const why = r.undecidable.get(t.name);
    const assumed = why === undefined ? assumedBy(rule, r.assume) : [];
    return {
      name: t.name,
      limit: `${rule.limit}/${formatDuration(rule.periodMs)} per ${perLabel(rule)}`,
      shadow: t.shadow,
      ...(why === undefined ? {} : { notDecidable: why }),
      ...(assumed.length === 0 ? {} : { assumed }),
      counted: t.counted,
      limited: t.limited,
      distinctKeysLimited: t.limitedKeys.size,
      topKeys: t.topKeys(top),
      hours,
    };
  });
  return {
    config: r.snapshot.source,
    format: meta.format,
    sources: meta.sources,
    lines: meta.lines,
    requests: log.lines,
    from: span === null ? null : iso(log.first),
    to: span === null ? null : iso(log.last),
    badLines: { count: log.bad, first: log.badSamples },
    noClientAddress: log.noAddress,
    limited: log.limited,
    uncounted: Object.fromEntries(log.outcomes),
    assumptions: [...r.assume].map((name) => ({ name, meaning: ASSUMPTIONS[name] })),
    credentialShown: log.credentialShown,
    rules,
    bans: r.bans.map((t, i) => banReport(r, t, guardRules.bans[i]!, top)),
    inFlight: guardRules.concurrency.map((c) => ({
      name: c.rule.name,
      limit: `${c.max} in flight per ${perLabel(c.rule)}`,
      notDecidable: IN_FLIGHT_REASON,
    })),
    linesPerSecond: meta.seconds > 0 ? Math.round(meta.lines / meta.seconds) : 0,
  };
}

const n = (v: number) => v.toLocaleString('en-US');

/** How the text report names each kind of uncounted request (a kind not named here: `KIND (no rule counted)`). */
export const UNCOUNTED_LABEL: Readonly<Record<string, string>> = {
  unmatched: 'unmatched (no rule counted)',
  undecidable: 'matched only by rules not decidable from this log (not counted)',
};

/** The report as text, for stdout. */
export function formatReport(rep: ReplayReport): string {
  const out = [
    `Replayed ${n(rep.requests)} requests (${n(rep.lines)} lines, ${rep.format}) from ${rep.from ?? '-'} to ${rep.to ?? '-'} against ${rep.config}`,
    `  would have been limited (429): ${n(rep.limited)}`,
  ];
  for (const a of rep.assumptions) out.push(`  assumed (--assume ${a.name}): ${a.meaning}`);
  if (rep.credentialShown > 0)
    out.push(
      `  showed a credential in the log all the same (--assume anonymous does not hold; decided without an account): ${n(rep.credentialShown)}`,
    );
  for (const [kind, count] of Object.entries(rep.uncounted))
    out.push(`  ${UNCOUNTED_LABEL[kind] ?? `${kind} (no rule counted)`}: ${n(count)}`);
  if (rep.noClientAddress > 0) out.push(`  skipped, no client address in the log: ${n(rep.noClientAddress)}`);
  if (rep.badLines.count > 0) {
    out.push(`  bad lines: ${n(rep.badLines.count)}; the first:`);
    for (const b of rep.badLines.first) out.push(`    ${b.source}:${b.line}: ${b.why}`);
  }
  for (const rule of rep.rules) out.push('', ...ruleLines(rule));
  for (const ban of rep.bans) out.push('', ...banLines(ban));
  for (const c of rep.inFlight)
    out.push('', `${c.name} (in-flight: ${c.limit})`, `  not decidable from this log: ${c.notDecidable}`);
  return out.join('\n');
}

function banLines(ban: BanReport): string[] {
  const head = `${ban.name} (ban: ${ban.ban})`;
  if (ban.notDecidable !== undefined) return [head, `  not decidable from this log: ${ban.notDecidable}`];
  const lines = [
    head,
    `  answers counted ${n(ban.counted)}, bans started ${n(ban.started)}, distinct keys banned ${n(ban.distinctKeysBanned)}, requests refused while banned ${n(ban.refused)}`,
  ];
  if (ban.topKeys.length > 0) lines.push(`  top keys: ${ban.topKeys.map((k) => `${k.key} (${n(k.bans)})`).join(', ')}`);
  const busy = ban.hours.filter((h) => h.started > 0);
  if (busy.length > 0)
    lines.push(`  bans started by hour: ${busy.map((h) => `${h.hour.slice(0, 13)}h ${n(h.started)}`).join(', ')}`);
  return lines;
}

function ruleLines(rule: RuleReport): string[] {
  const head = `${rule.name} (${rule.limit})${rule.shadow ? ' [shadow: would have limited, never rejects]' : ''}`;
  if (rule.notDecidable !== undefined) return [head, `  not decidable from this log: ${rule.notDecidable}`];
  const lines = [head];
  if (rule.assumed !== undefined) lines.push(`  decided assuming: ${rule.assumed.join(', ')}`);
  lines.push(
    `  counted ${n(rule.counted)}, would have limited ${n(rule.limited)}, distinct keys limited ${n(rule.distinctKeysLimited)}`,
  );
  if (rule.topKeys.length > 0)
    lines.push(`  top keys: ${rule.topKeys.map((k) => `${k.key} (${n(k.limited)})`).join(', ')}`);
  const busy = rule.hours.filter((h) => h.limited > 0);
  if (busy.length > 0)
    lines.push(`  limited by hour: ${busy.map((h) => `${h.hour.slice(0, 13)}h ${n(h.limited)}`).join(', ')}`);
  return lines;
}

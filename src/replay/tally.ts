/**
 * @module What replay counts while it drives a log: per rule, the requests it counted and those it
 * would have limited, by hour, and the keys it would have limited; per log, its lines, the bad ones
 * (the first few by place), and the requests nothing counted for a reason of their own.
 */
import { displayKey } from '../keys/index.js';

export const HOUR_MS = 3_600_000;
/** Bad lines named by place in the report; the rest are counted. */
export const BAD_SAMPLES = 5;

/** One more for `key`. */
function bump<K>(counts: Map<K, number>, key: K): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

/** The `n` keys counted most (ties in key order), each as an operator knows it (displayKey), with its count. */
function mostCounted(counts: ReadonlyMap<string, number>, n: number): [key: string, count: number][] {
  return [...counts]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .slice(0, n)
    .map(([key, count]) => [displayKey(key), count]);
}

export class RuleTally {
  counted = 0;
  limited = 0;
  /** Per hour (epoch ms / HOUR_MS): [counted, limited]. */
  readonly hours = new Map<number, [number, number]>();
  /** Bucket key → requests limited under it. */
  readonly limitedKeys = new Map<string, number>();

  constructor(
    readonly name: string,
    readonly shadow: boolean,
  ) {}

  count(hour: number, limitedKey: string | null): void {
    this.counted++;
    let h = this.hours.get(hour);
    if (h === undefined) this.hours.set(hour, (h = [0, 0]));
    h[0]++;
    if (limitedKey === null) return;
    this.limited++;
    h[1]++;
    bump(this.limitedKeys, limitedKey);
  }

  /** The `n` keys limited most, as an operator knows them (displayKey). */
  topKeys(n: number): { key: string; limited: number }[] {
    return mostCounted(this.limitedKeys, n).map(([key, limited]) => ({ key, limited }));
  }
}

export interface BadLine {
  readonly source: string;
  readonly line: number;
  readonly why: string;
}

/** The log's own counts, beside the rules'. */
export class LogTally {
  lines = 0;
  bad = 0;
  readonly badSamples: BadLine[] = [];
  /** Requests with no client address the table could key (rategate's log without `log.client: clear`). */
  noAddress = 0;
  /** Requests under `--assume anonymous` whose line showed a credential (decided without an account all the same). */
  credentialShown = 0;
  /**
   * Requests no driven rule counted, by why: unmatched (no rule's route), undecidable (only rules the log
   * cannot decide match), exempt, blocked, a refusal (bad path, bad query …).
   */
  readonly outcomes = new Map<string, number>();
  /** Requests at least one enforced rule would have refused (429). */
  limited = 0;
  first = Infinity;
  last = -Infinity;

  badLine(source: string, line: number, why: string): void {
    this.bad++;
    if (this.badSamples.length < BAD_SAMPLES) this.badSamples.push({ source, line, why });
  }

  outcome(kind: string): void {
    bump(this.outcomes, kind);
  }
}

/** What replay counts per ban: the answers it counted, the bans it started (by hour), and on which keys. */
export class BanTally {
  /** Answers counted towards a ban (the ban matched, and its `on` took the status). */
  counted = 0;
  started = 0;
  /** Requests refused 403 because a live ban of this name held their key. */
  refused = 0;
  /** Per hour (epoch ms / HOUR_MS): bans started. */
  readonly hours = new Map<number, number>();
  /** Ban key → bans started on it. */
  readonly keys = new Map<string, number>();

  constructor(readonly name: string) {}

  start(hour: number, key: string): void {
    this.started++;
    bump(this.hours, hour);
    bump(this.keys, key);
  }

  /** The `n` keys banned most often, as an operator knows them. */
  topKeys(n: number): { key: string; bans: number }[] {
    return mostCounted(this.keys, n).map(([key, bans]) => ({ key, bans }));
  }
}

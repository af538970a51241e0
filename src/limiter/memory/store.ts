/**
 * @module The in-process store: exact, all-or-nothing counting in a packed table, with expired buckets
 * swept, and a bound on the buckets held (`store.maxKeys`).
 *
 * When full, a request that needs a bucket the table does not hold is refused (429, retry in 1 s), never
 * admitted uncounted, and a bucket it holds is never dropped to make room: so no client is ever admitted
 * past a limit, and a flood of new keys costs new clients an answer, not the memory of the process.
 * Keys whose values the client chooses (tokens, headers, parameters, cookies, IPv6 networks) may fill
 * only 90 % of the table; the rest is kept for IPv4 addresses, accounts and `global`, so that such a
 * flood leaves those clients their buckets.
 */
import { evaluate, Evaluation, refundedState, type State } from '../algorithms.js';
import { BucketTable, ROW } from './bucket-table.js';
import { CLIENT_CHOSEN_SHARE, DEFAULT_MAX_KEYS, fullEvaluation, reservedKind } from './store-bound.js';
import type { BucketSpec, BucketState, ConsumeOutcome, Store } from '../types.js';

export { DEFAULT_MAX_KEYS } from './store-bound.js';

export interface MemoryStoreOptions {
  now?: () => number;
  /** How many entries one sweep step examines; steps run every `sweepIntervalMs`. */
  sweepBatch?: number;
  sweepIntervalMs?: number;
  /** Buckets held at most (default DEFAULT_MAX_KEYS). */
  maxKeys?: number;
  /** Told of each request refused because the table is full (for a metric and a log line). */
  onFull?: (key: string) => void;
}

const RESOLVED: Promise<void> = Promise.resolve();

/** The row of a bucket the table had no room for (never written). */
const FULL = -2;

/**
 * Bucket state lives in a BucketTable: typed arrays outside the V8 heap, a key packed into 16 bytes.
 * A Map of string keys cost ~170 B of live heap per client and, with V8 sizing its heap as a multiple of
 * the live heap, ~630 B of RSS in a busy gateway; the table costs 60–90 B (bench/memory-per-client.ts).
 */
export class MemoryStore implements Store {
  private readonly table = new BucketTable();
  private readonly now: () => number;
  private readonly sweepBatch: number;
  /** Next row the sweeper looks at; rows are dense, so a pass ends at `table.size`. */
  private sweepRow = 0;
  /** consumeSync's rows, reused: it runs to completion, so no two calls share it. */
  private readonly rows: number[] = [];
  /** Per bucket of the request being decided: what weighing it found (consumeSync). */
  private readonly evals: Evaluation[] = [];
  /** The sweep's timer: set while the table holds rows (an empty store, such as an idle fallback, has none). */
  private timer: NodeJS.Timeout | undefined;
  private readonly sweepIntervalMs: number;
  /** rowState()'s answer, reused (see there). */
  private readonly scratch: [number, number, number] = [0, 0, 0];
  /** refund()'s next state and expiry, reused. */
  private readonly refundScratch: number[] = [0, 0, 0, 0];
  readonly maxKeys: number;
  private readonly clientChosenMax: number;
  private readonly onFull: ((key: string) => void) | undefined;
  /** When a full table last forced a sweep step (at most one per 100 ms on the request path). */
  private forcedSweepAt = -Infinity;

  constructor(opts: MemoryStoreOptions = {}) {
    this.now = opts.now ?? Date.now;
    this.maxKeys = opts.maxKeys ?? DEFAULT_MAX_KEYS;
    this.clientChosenMax = Math.floor(this.maxKeys * CLIENT_CHOSEN_SHARE);
    this.onFull = opts.onFull;
    this.sweepBatch = opts.sweepBatch ?? 20_000;
    this.sweepIntervalMs = opts.sweepIntervalMs ?? 250;
  }

  /** Sweeps every interval until a pass leaves the table empty; a new row starts it again. */
  private startSweep(): void {
    this.timer = setInterval(() => {
      this.sweepStep();
      if (this.table.size === 0) this.stopSweep();
    }, this.sweepIntervalMs);
    this.timer.unref();
  }

  private stopSweep(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Number of buckets held, expired ones not yet swept included (for tests and memory measurements). */
  get size(): number {
    return this.table.size;
  }

  consume(specs: readonly BucketSpec[]): Promise<ConsumeOutcome> {
    return Promise.resolve(this.consumeSync(specs));
  }

  /** Always decided here: the Store contract's synchronous answer. */
  consumeLocal(specs: readonly BucketSpec[]): ConsumeOutcome {
    return this.consumeSync(specs);
  }

  /**
   * The decision itself, synchronous: JavaScript runs it to completion, so check-then-charge over all
   * buckets is atomic without a lock.
   */
  consumeSync(specs: readonly BucketSpec[]): ConsumeOutcome {
    const now = this.now();
    const evals = this.evaluations(specs.length);
    // Rows found here stay valid through the writes below: adding rows never moves the others.
    const rows = this.rows;
    let allowed = true;
    let adding = 0;
    let refusedFor: string | undefined;
    for (let i = 0; i < specs.length; i++) {
      const spec = specs[i]!;
      let row = this.table.find(spec.key);
      if (row < 0 && !this.room(spec.key, adding)) {
        // No room: refused (a shadow rule only reports, and keeps no bucket).
        row = FULL;
        if (!spec.shadow) {
          fullEvaluation(now, evals[i]!);
          rows[i] = row;
          refusedFor ??= spec.key;
          allowed = false;
          continue;
        }
      } else if (row < 0) adding++;
      rows[i] = row;
      const e = evaluate(spec, this.rowState(row, now), now, evals[i]!);
      if (!e.ok && !spec.shadow) allowed = false;
    }
    const buckets: BucketState[] = new Array(specs.length);
    for (let i = 0; i < specs.length; i++) {
      const spec = specs[i]!;
      const e = evals[i]!;
      if (allowed && e.ok && rows[i] === FULL) {
        buckets[i] = { remaining: e.remainingIfCharged, resetAt: e.resetIfCharged, limited: false, retryAt: now };
        continue;
      }
      // Charged only when the whole request passes and this bucket itself had room (a full shadow
      // bucket is reported as limited but not pushed past its limit).
      if (allowed && e.ok) {
        this.write(rows[i]!, spec.key, e);
        buckets[i] = { remaining: e.remainingIfCharged, resetAt: e.resetIfCharged, limited: false, retryAt: now };
      } else {
        buckets[i] = {
          remaining: e.ok ? e.remainingNow : 0,
          resetAt: e.resetNow,
          limited: !e.ok,
          retryAt: e.retryAt,
        };
      }
    }
    // Told last: what it runs (a log line, a metric) may come back here, and the evaluations are reused.
    if (refusedFor !== undefined) this.onFull?.(refusedFor);
    return { allowed, decider: 'memory', now, buckets };
  }

  /** `n` evaluations to write into, reused by every decision (each runs to completion). */
  private evaluations(n: number): Evaluation[] {
    const evals = this.evals;
    while (evals.length < n) evals.push(new Evaluation());
    return evals;
  }

  /** Gives back synchronously what an allowed decision charged (algorithms.ts refundedState, as refund.lua). */
  refund(specs: readonly BucketSpec[], outcome: ConsumeOutcome): Promise<void> {
    if (!outcome.allowed) return RESOLVED;
    const now = this.now();
    const next = this.refundScratch;
    for (let i = 0; i < specs.length; i++) {
      const spec = specs[i]!;
      // A limited bucket of an allowed request is a full shadow one: it was not charged.
      if (outcome.buckets[i]!.limited) continue;
      const row = this.table.find(spec.key);
      const state = this.rowState(row, now);
      if (state === undefined || !refundedState(spec, state, outcome.now, now, next)) continue;
      const at = row * ROW;
      const table = this.table.state;
      for (let k = 0; k < 4; k++) table[at + k] = next[k]!;
    }
    return RESOLVED;
  }

  peek(spec: BucketSpec): Promise<BucketState> {
    const now = this.now();
    return Promise.resolve(this.stateNow(spec, now, this.evaluations(1)[0]!));
  }

  read(specs: readonly BucketSpec[]): Promise<ConsumeOutcome> {
    return Promise.resolve(this.readLocal(specs));
  }

  /** Always read here: every bucket weighed as a peek weighs it, nothing written. */
  readLocal(specs: readonly BucketSpec[]): ConsumeOutcome {
    const now = this.now();
    const e = this.evaluations(1)[0]!;
    const buckets: BucketState[] = new Array(specs.length);
    let allowed = true;
    for (let i = 0; i < specs.length; i++) {
      const state = this.stateNow(specs[i]!, now, e);
      if (state.limited && !specs[i]!.shadow) allowed = false;
      buckets[i] = state;
    }
    return { allowed, decider: 'memory', now, buckets };
  }

  /** A bucket's state as things stand (a peek's answer), weighed into `e`. */
  private stateNow(spec: BucketSpec, now: number, e: Evaluation): BucketState {
    evaluate(spec, this.rowState(this.table.find(spec.key), now), now, e);
    return { remaining: e.remainingNow, resetAt: e.resetNow, limited: !e.ok, retryAt: e.retryAt };
  }

  reset(spec: BucketSpec): Promise<void> {
    const row = this.table.find(spec.key);
    if (row >= 0) this.table.remove(row);
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.stopSweep();
    this.table.clear();
    this.sweepRow = 0;
    return Promise.resolve();
  }

  /**
   * Whether a new bucket for `key` fits, `adding` more being added by the same request. When it does
   * not, a sweep step runs at once (at most every 100 ms): expired buckets make room before the timer's.
   */
  private room(key: string, adding: number): boolean {
    const size = this.table.size + adding;
    if (size < this.clientChosenMax || (size < this.maxKeys && reservedKind(key))) return true;
    const t = this.now();
    if (t - this.forcedSweepAt >= 100) {
      this.forcedSweepAt = t;
      this.sweepStep();
      if (this.table.size + adding < (reservedKind(key) ? this.maxKeys : this.clientChosenMax)) return true;
    }
    return false;
  }

  /**
   * A row's state, or undefined when absent or expired (an expired row is left for the sweeper). In a
   * scratch tuple, valid until the next read: evaluate() reads it at once and never hands it back.
   */
  private rowState(row: number, now: number): State | undefined {
    if (row < 0) return undefined;
    const at = row * ROW;
    const state = this.table.state;
    if (state[at + 3]! <= now) return undefined;
    const s = this.scratch;
    s[0] = state[at]!;
    s[1] = state[at + 1]!;
    s[2] = state[at + 2]!;
    return s;
  }

  private write(row: number, key: string, e: Evaluation): void {
    let r = row;
    if (r < 0) {
      r = this.table.insert(key);
      if (this.timer === undefined && this.sweepIntervalMs > 0) this.startSweep();
    }
    const at = r * ROW;
    const state = this.table.state;
    state[at] = e.nextA;
    state[at + 1] = e.nextB;
    state[at + 2] = e.nextC;
    state[at + 3] = e.expireAt;
  }

  /**
   * Drops expired rows a batch at a time, resuming where the last step stopped, so that memory stays
   * bounded by the clients of one period without ever pausing the event loop for a full scan. Removing
   * a row moves the last one into its place, which is looked at next.
   */
  sweepStep(): void {
    const now = this.now();
    const table = this.table;
    let row = this.sweepRow;
    for (let i = 0; i < this.sweepBatch; i++) {
      if (row >= table.size) {
        this.sweepRow = 0;
        return;
      }
      if (table.state[row * ROW + 3]! <= now) table.remove(row);
      else row++;
    }
    this.sweepRow = row;
  }
}

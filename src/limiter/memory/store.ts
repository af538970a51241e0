/** @module The in-process store: exact, all-or-nothing counting in a packed table, with expired buckets swept. */
import { evaluate, type Evaluation, type State } from '../algorithms.js';
import { BucketTable, ROW } from './bucket-table.js';
import type { BucketSpec, BucketState, ConsumeOutcome, Store } from '../types.js';

export interface MemoryStoreOptions {
  now?: () => number;
  /** How many entries one sweep step examines; steps run every `sweepIntervalMs`. */
  sweepBatch?: number;
  sweepIntervalMs?: number;
}

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
  private readonly timer: NodeJS.Timeout | undefined;

  constructor(opts: MemoryStoreOptions = {}) {
    this.now = opts.now ?? Date.now;
    this.sweepBatch = opts.sweepBatch ?? 20_000;
    const interval = opts.sweepIntervalMs ?? 250;
    if (interval > 0) {
      this.timer = setInterval(() => this.sweepStep(), interval);
      this.timer.unref();
    }
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
    const evals: Evaluation[] = new Array(specs.length);
    // Rows found here stay valid through the writes below: adding rows never moves the others.
    const rows = this.rows;
    let allowed = true;
    for (let i = 0; i < specs.length; i++) {
      const spec = specs[i]!;
      const row = this.table.find(spec.key);
      rows[i] = row;
      const e = evaluate(spec, this.read(row, now), now);
      evals[i] = e;
      if (!e.ok && !spec.shadow) allowed = false;
    }
    const buckets: BucketState[] = new Array(specs.length);
    for (let i = 0; i < specs.length; i++) {
      const spec = specs[i]!;
      const e = evals[i]!;
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
    return { allowed, now, buckets };
  }

  peek(spec: BucketSpec): Promise<BucketState> {
    const now = this.now();
    const e = evaluate(spec, this.read(this.table.find(spec.key), now), now);
    return Promise.resolve({ remaining: e.remainingNow, resetAt: e.resetNow, limited: !e.ok, retryAt: e.retryAt });
  }

  reset(spec: BucketSpec): Promise<void> {
    const row = this.table.find(spec.key);
    if (row >= 0) this.table.remove(row);
    return Promise.resolve();
  }

  close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.table.clear();
    this.sweepRow = 0;
    return Promise.resolve();
  }

  /** A row's state, or undefined when absent or expired (an expired row is left for the sweeper). */
  private read(row: number, now: number): State | undefined {
    if (row < 0) return undefined;
    const at = row * ROW;
    const state = this.table.state;
    if (state[at + 3]! <= now) return undefined;
    return [state[at]!, state[at + 1]!, state[at + 2]!];
  }

  private write(row: number, key: string, e: Evaluation): void {
    const r = row >= 0 ? row : this.table.insert(key);
    const at = r * ROW;
    const state = this.table.state;
    state[at] = e.next[0];
    state[at + 1] = e.next[1];
    state[at + 2] = e.next[2];
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

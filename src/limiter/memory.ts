/** @module The in-process store: exact, all-or-nothing counting in a Map, with expired buckets swept. */
import { evaluate, type Evaluation, type State } from './algorithms.js';
import type { BucketSpec, BucketState, ConsumeOutcome, Store } from './types.js';

interface Entry {
  a: number;
  b: number;
  c: number;
  /** Epoch ms after which the entry carries no information and may be dropped. */
  expireAt: number;
}

export interface MemoryStoreOptions {
  now?: () => number;
  /** How many entries one sweep step examines; steps run every `sweepIntervalMs`. */
  sweepBatch?: number;
  sweepIntervalMs?: number;
}

export class MemoryStore implements Store {
  private readonly buckets = new Map<string, Entry>();
  private readonly now: () => number;
  private readonly sweepBatch: number;
  private sweepCursor: IterableIterator<[string, Entry]> | undefined;
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

  /** Number of buckets held (for tests and memory measurements). */
  get size(): number {
    return this.buckets.size;
  }

  consume(specs: readonly BucketSpec[]): Promise<ConsumeOutcome> {
    return Promise.resolve(this.consumeSync(specs));
  }

  /**
   * The decision itself, synchronous: JavaScript runs it to completion, so check-then-charge over all
   * buckets is atomic without a lock.
   */
  consumeSync(specs: readonly BucketSpec[]): ConsumeOutcome {
    const now = this.now();
    const evals: Evaluation[] = new Array(specs.length);
    let allowed = true;
    for (let i = 0; i < specs.length; i++) {
      const spec = specs[i]!;
      const e = evaluate(spec, this.read(spec.key, now), now);
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
        this.write(spec.key, e);
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
    const e = evaluate(spec, this.read(spec.key, now), now);
    return Promise.resolve({ remaining: e.remainingNow, resetAt: e.resetNow, limited: !e.ok, retryAt: e.retryAt });
  }

  reset(spec: BucketSpec): Promise<void> {
    this.buckets.delete(spec.key);
    return Promise.resolve();
  }

  close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.buckets.clear();
    return Promise.resolve();
  }

  private read(key: string, now: number): State | undefined {
    const entry = this.buckets.get(key);
    if (!entry) return undefined;
    if (entry.expireAt <= now) {
      this.buckets.delete(key);
      return undefined;
    }
    return [entry.a, entry.b, entry.c];
  }

  private write(key: string, e: Evaluation): void {
    const entry = this.buckets.get(key);
    if (entry) {
      entry.a = e.next[0];
      entry.b = e.next[1];
      entry.c = e.next[2];
      entry.expireAt = e.expireAt;
    } else {
      this.buckets.set(key, { a: e.next[0], b: e.next[1], c: e.next[2], expireAt: e.expireAt });
    }
  }

  /**
   * Drops expired entries a batch at a time, resuming where the last step stopped, so that memory stays
   * bounded by the clients of one period without ever pausing the event loop for a full scan.
   */
  sweepStep(): void {
    const now = this.now();
    this.sweepCursor ??= this.buckets.entries();
    for (let i = 0; i < this.sweepBatch; i++) {
      const next = this.sweepCursor.next();
      if (next.done) {
        this.sweepCursor = undefined;
        return;
      }
      const [key, entry] = next.value;
      if (entry.expireAt <= now) this.buckets.delete(key);
    }
  }
}

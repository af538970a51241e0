/** @module The in-process store: exact, all-or-nothing counting in a Map, with expired buckets swept. */
import { evaluate, type Evaluation, type State } from './algorithms.js';
import type { BucketSpec, BucketState, ConsumeOutcome, Store } from './types.js';

/**
 * A flat copy of a key built by concatenation. V8 keeps such strings as trees of pieces (ConsString)
 * even after hashing them; stored as Map keys they cost ~245 bytes each instead of ~100 flat. Paid
 * once per new bucket, never per request.
 */
function flatCopy(key: string): string {
  return Buffer.from(key, 'utf8').toString('utf8');
}

/** Doubles per slot in the slab: state a, b, c, then expireAt (epoch ms after which it carries nothing). */
const SLOT = 4;

export interface MemoryStoreOptions {
  now?: () => number;
  /** How many entries one sweep step examines; steps run every `sweepIntervalMs`. */
  sweepBatch?: number;
  sweepIntervalMs?: number;
}

/**
 * Bucket state lives in one Float64Array slab, the Map holding only key → slot number (a small integer).
 * An object per bucket would box its epoch-millisecond doubles on V8 with pointer compression and cost
 * about three times the memory: 1 million clients must fit in a few hundred MB.
 */
export class MemoryStore implements Store {
  private readonly buckets = new Map<string, number>();
  private slab = new Float64Array(SLOT * 1024);
  private readonly freeSlots: number[] = [];
  private nextSlot = 0;
  private readonly now: () => number;
  private readonly sweepBatch: number;
  private sweepCursor: IterableIterator<[string, number]> | undefined;
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
    this.forget(spec.key);
    return Promise.resolve();
  }

  close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.buckets.clear();
    this.freeSlots.length = 0;
    this.nextSlot = 0;
    return Promise.resolve();
  }

  private read(key: string, now: number): State | undefined {
    const slot = this.buckets.get(key);
    if (slot === undefined) return undefined;
    const at = slot * SLOT;
    const slab = this.slab;
    if (slab[at + 3]! <= now) {
      this.forget(key);
      return undefined;
    }
    return [slab[at]!, slab[at + 1]!, slab[at + 2]!];
  }

  private write(key: string, e: Evaluation): void {
    let slot = this.buckets.get(key);
    if (slot === undefined) {
      slot = this.allocate();
      this.buckets.set(flatCopy(key), slot);
    }
    const at = slot * SLOT;
    const slab = this.slab;
    slab[at] = e.next[0];
    slab[at + 1] = e.next[1];
    slab[at + 2] = e.next[2];
    slab[at + 3] = e.expireAt;
  }

  private allocate(): number {
    const reused = this.freeSlots.pop();
    if (reused !== undefined) return reused;
    if ((this.nextSlot + 1) * SLOT > this.slab.length) {
      const grown = new Float64Array(this.slab.length * 2);
      grown.set(this.slab);
      this.slab = grown;
    }
    return this.nextSlot++;
  }

  private forget(key: string): void {
    const slot = this.buckets.get(key);
    if (slot === undefined) return;
    this.buckets.delete(key);
    this.freeSlots.push(slot);
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
      const [key, slot] = next.value;
      if (this.slab[slot * SLOT + 3]! <= now) {
        this.buckets.delete(key);
        this.freeSlots.push(slot);
      }
    }
  }
}

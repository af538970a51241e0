/**
 * @module The buckets of the clients refused last, per rule, by tag: refused clients taking turns (a
 * flood from a thousand addresses) get their buckets again, each key string and its hash made once,
 * instead of fresh keys for the stores to hash on every look-up. One bound for the whole table, not one
 * per rule, so memory stays bounded however many rules a spray of clients touches: past it, every rule's
 * memo is emptied at once (O(rules), rare) and fills again. */
import type { CompiledRule } from '../config/types.js';
import type { BucketSpec } from '../limiter/types.js';

/** A rule's bucket for one tag: the rule (or override) it counts under, and the spec built for them. */
export interface RecentBucket {
  readonly tag: string;
  readonly rule: CompiledRule;
  readonly spec: BucketSpec;
  /** Kept in the memo (keep): a client refused again costs no look-up to find it there. */
  kept: boolean;
}

/** Buckets remembered for the whole table: ~300 B each (a spec, its key, the entry), ~2.5 MB at most. */
export const RECENT_BUCKETS = 8192;

export class RecentBuckets {
  private readonly byRule: Map<string, RecentBucket>[];
  private size = 0;

  constructor(
    rules: number,
    private readonly max = RECENT_BUCKETS,
  ) {
    this.byRule = Array.from({ length: rules }, () => new Map<string, RecentBucket>());
  }

  get(index: number, tag: string): RecentBucket | undefined {
    return this.byRule[index]!.get(tag);
  }

  /** Keeps `b` for rule `index`, by its tag (once: a client refused again is kept already). */
  keep(index: number, b: RecentBucket): void {
    if (b.kept) return;
    const memo = this.byRule[index]!;
    if (!memo.has(b.tag)) {
      if (this.size >= this.max) {
        for (const m of this.byRule) m.clear();
        this.size = 0;
      }
      this.size++;
    }
    b.kept = true;
    memo.set(b.tag, b);
  }
}

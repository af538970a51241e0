/**
 * @module Triage: the keys most limited recently, per rule, in bounded memory. A Space-Saving sketch
 * (Metwally et al.) of `capacity` counters per rule finds every key limited more than 1/capacity of the
 * time, with counts that overestimate by at most the smallest counter; two generations that rotate
 * every `windowMs` make "recently" mean the last one to two windows. Keys arrive as the store names
 * them and are shown as the operator reads them (`display`: keys/rule-key.ts displayKey) only when the
 * sketch is read: a flood of 429s pays a map look-up each, not the key's formatting.
 */

export interface TopKey {
  readonly key: string;
  readonly count: number;
  /** How much `count` may overstate (Space-Saving's error bound for this key). */
  readonly error: number;
}

class SpaceSaving {
  readonly counts = new Map<string, { count: number; error: number }>();
  /**
   * Keys that held the smallest count when last looked for, and that count: a flood of new keys (each a
   * replacement once the sketch is full) takes them one by one, and the counters are scanned again only
   * when they are used up, so a replacement costs O(1) amortized instead of a scan of every counter.
   */
  private smallest: string[] = [];
  private smallestCount = 0;

  constructor(private readonly capacity: number) {}

  add(key: string): void {
    const c = this.counts.get(key);
    if (c !== undefined) return void c.count++;
    if (this.counts.size < this.capacity) return void this.counts.set(key, { count: 1, error: 0 });
    // Replace a smallest counter: the newcomer inherits its count as its possible error (and its
    // object: a flood of new keys replaces one per 429, and allocates nothing for it).
    const replaced = this.takeSmallest();
    replaced.error = replaced.count;
    replaced.count++;
    this.counts.set(key, replaced);
  }

  /** Removes a counter with the smallest count and returns it. */
  private takeSmallest(): { count: number; error: number } {
    for (;;) {
      const k = this.smallest.pop();
      if (k === undefined) {
        this.findSmallest();
        continue;
      }
      // Counted again (or replaced) since it was found: no longer a smallest one.
      const v = this.counts.get(k);
      if (v === undefined || v.count !== this.smallestCount) continue;
      this.counts.delete(k);
      return v;
    }
  }

  private findSmallest(): void {
    let min = Infinity;
    for (const v of this.counts.values()) if (v.count < min) min = v.count;
    this.smallestCount = min;
    for (const [k, v] of this.counts) if (v.count === min) this.smallest.push(k);
  }
}

export interface TopLimitedOptions {
  /** Counters per rule (default 128). */
  readonly capacity?: number;
  /** A generation's length (default 5 minutes). */
  readonly windowMs?: number;
  readonly now?: () => number;
  /** Rules tracked at most (names come from the table, so this only bounds a pathological one). */
  readonly maxRules?: number;
  /** A key as `top()` shows it; keys shown alike are counted together there. */
  readonly display?: (key: string) => string;
}

export class TopLimited {
  private current = new Map<string, SpaceSaving>();
  private previous = new Map<string, SpaceSaving>();
  private rotatedAt: number;

  private readonly capacity: number;
  private readonly windowMs: number;
  private readonly now: () => number;
  private readonly maxRules: number;
  private readonly display: (key: string) => string;

  constructor(o: TopLimitedOptions = {}) {
    this.capacity = Math.max(1, o.capacity ?? 128);
    this.windowMs = o.windowMs ?? 5 * 60_000;
    this.now = o.now ?? Date.now;
    this.maxRules = o.maxRules ?? 1_000;
    this.display = o.display ?? ((key) => key);
    this.rotatedAt = this.now();
  }

  add(rule: string, key: string): void {
    this.rotate();
    let s = this.current.get(rule);
    if (s === undefined) {
      if (this.current.size >= this.maxRules) return;
      this.current.set(rule, (s = new SpaceSaving(this.capacity)));
    }
    s.add(key);
  }

  /** The `n` keys most limited for `rule` over the current and previous windows, highest first. */
  top(rule: string, n: number): TopKey[] {
    this.rotate();
    const merged = new Map<string, { count: number; error: number }>();
    for (const gen of [this.previous, this.current]) {
      for (const [raw, v] of gen.get(rule)?.counts ?? []) {
        const k = this.display(raw);
        const m = merged.get(k);
        if (m === undefined) merged.set(k, { ...v });
        else {
          m.count += v.count;
          m.error += v.error;
        }
      }
    }
    return [...merged]
      .map(([key, v]) => ({ key, count: v.count, error: v.error }))
      .sort((a, b) => b.count - a.count)
      .slice(0, n);
  }

  /** Rules with something recorded recently. */
  rules(): string[] {
    this.rotate();
    return [...new Set([...this.previous.keys(), ...this.current.keys()])];
  }

  private rotate(): void {
    const t = this.now();
    if (t - this.rotatedAt < this.windowMs) return;
    // Two windows without a rotation: the previous one is stale too.
    this.previous = t - this.rotatedAt < 2 * this.windowMs ? this.current : new Map();
    this.current = new Map();
    this.rotatedAt = t;
  }
}

/**
 * @module Live per-rule rates for the status page: samples the per-rule decision counters the metrics
 * already keep (allowed, limited, shadow_limited) into a ring buffer of fixed size, and answers the rate
 * per second over the last minute and the last five minutes.
 */

/** What the request path counts per rule (the metrics' RuleCounters). */
export interface DecisionCounts {
  readonly allowed: number;
  readonly limited: number;
  readonly shadowLimited: number;
}

/** Requests per second by decision. */
export interface DecisionRates {
  readonly allowed: number;
  readonly limited: number;
  readonly shadowLimited: number;
  /** The seconds the rate is taken over: the window, or less while the gateway is younger than it. */
  readonly seconds: number;
}

export interface RuleRatesOptions {
  /** The names of the rules in force (read at every sample: a reload adds and drops rules). */
  readonly rules: () => readonly string[];
  /** The live counters of one rule. */
  readonly counts: (rule: string) => DecisionCounts;
  readonly now?: () => number;
  /** How often a sample is taken (default 5 s). */
  readonly intervalMs?: number;
  /** The longest window asked (default 5 min): the ring holds this much history and one interval more. */
  readonly historyMs?: number;
}

export const WINDOWS_MS = { '1m': 60_000, '5m': 300_000 } as const;
export type RateWindow = keyof typeof WINDOWS_MS;

const FIELDS = 3;

/** One rule's samples: FIELDS numbers per slot, in the same slots as the shared sample times. */
interface RuleRing {
  readonly values: Float64Array;
  /** The sequence number of this rule's first sample (a rule added by a reload has no older ones). */
  readonly first: number;
}

/**
 * Memory is bounded by the rules in force: each holds `slots × 3` numbers (62 slots by default, about
 * 1.5 kB a rule); a rule no longer in force loses its ring at the next sample. The rate's numerator is the
 * live counter, so it moves with every request, not only every sample.
 */
export class RuleRates {
  private readonly slots: number;
  private readonly times: Float64Array;
  private readonly rings = new Map<string, RuleRing>();
  /** Samples taken so far; the next goes to slot `seq % slots`. */
  private seq = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly now: () => number;
  private readonly intervalMs: number;

  constructor(private readonly opts: RuleRatesOptions) {
    this.now = opts.now ?? Date.now;
    this.intervalMs = opts.intervalMs ?? 5_000;
    this.slots = Math.ceil((opts.historyMs ?? WINDOWS_MS['5m']) / this.intervalMs) + 2;
    this.times = new Float64Array(this.slots);
    this.sample();
  }

  /** Samples every interval until stop(); the timer never keeps the process alive. */
  start(): void {
    this.timer ??= setInterval(() => this.sample(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Takes one sample of every rule in force now (the timer calls it; tests call it after moving the clock). */
  sample(): void {
    const slot = this.seq % this.slots;
    this.times[slot] = this.now();
    const names = new Set(this.opts.rules());
    for (const name of this.rings.keys()) if (!names.has(name)) this.rings.delete(name);
    for (const name of names) {
      let ring = this.rings.get(name);
      if (ring === undefined) this.rings.set(name, (ring = { values: new Float64Array(this.slots * FIELDS), first: this.seq }));
      const c = this.opts.counts(name);
      const at = slot * FIELDS;
      ring.values[at] = c.allowed;
      ring.values[at + 1] = c.limited;
      ring.values[at + 2] = c.shadowLimited;
    }
    this.seq++;
  }

  /** The rule's rates over the window, or zeros for a rule not sampled yet. */
  rates(rule: string, window: RateWindow): DecisionRates {
    const ring = this.rings.get(rule);
    if (ring === undefined) return { allowed: 0, limited: 0, shadowLimited: 0, seconds: 0 };
    const now = this.now();
    const from = this.baseline(ring, now - WINDOWS_MS[window]);
    const at = (from % this.slots) * FIELDS;
    // Under a second of history would turn one request into a burst of hundreds per second.
    const seconds = Math.max(1, (now - this.times[from % this.slots]!) / 1000);
    const c = this.opts.counts(rule);
    const per = (live: number, then: number): number => Math.max(0, live - then) / seconds;
    return {
      allowed: per(c.allowed, ring.values[at]!),
      limited: per(c.limited, ring.values[at + 1]!),
      shadowLimited: per(c.shadowLimited, ring.values[at + 2]!),
      seconds: Math.round(seconds),
    };
  }

  /** The newest sample at or before `since`, else the oldest this rule has (the window is then shorter). */
  private baseline(ring: RuleRing, since: number): number {
    const oldest = Math.max(ring.first, this.seq - this.slots);
    for (let s = this.seq - 1; s > oldest; s--) if (this.times[s % this.slots]! <= since) return s;
    return oldest;
  }
}

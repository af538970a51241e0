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
  /** How often a sample is taken while the rates are read (default 5 s). */
  readonly intervalMs?: number;
  /** How often a sample is taken while nobody reads them (default 60 s): no timer work every 5 s on an unwatched gateway. */
  readonly idleIntervalMs?: number;
  /** How long after the last read the sampling stays at `intervalMs` (default 60 s; the page reads every 3–15 s). */
  readonly readMs?: number;
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
 *
 * Sampling is lazy: every `idleIntervalMs` while nobody reads the rates, every `intervalMs` from the
 * first read on until `readMs` after the last. A first read after a quiet spell takes its baseline from
 * the coarse samples (a window up to one idle interval longer; `seconds` says how long); it is exact
 * again once the fine samples cover the window.
 */
export class RuleRates {
  private readonly slots: number;
  private readonly times: Float64Array;
  private readonly rings = new Map<string, RuleRing>();
  /** Samples taken so far; the next goes to slot `seq % slots`. */
  private seq = 0;
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  /** The interval the timer was set with: `intervalMs` while read, else `idleIntervalMs`. */
  private every = 0;
  /** When the rates were last read (−Infinity: never). */
  private readAt = -Infinity;
  private readonly now: () => number;
  private readonly intervalMs: number;
  private readonly idleIntervalMs: number;
  private readonly readMs: number;

  constructor(private readonly opts: RuleRatesOptions) {
    this.now = opts.now ?? Date.now;
    this.intervalMs = opts.intervalMs ?? 5_000;
    this.idleIntervalMs = Math.max(this.intervalMs, opts.idleIntervalMs ?? 60_000);
    this.readMs = opts.readMs ?? 60_000;
    this.slots = Math.ceil((opts.historyMs ?? WINDOWS_MS['5m']) / this.intervalMs) + 2;
    this.times = new Float64Array(this.slots);
    this.sample();
  }

  /** Samples until stop(), at the cadence reads call for; the timer never keeps the process alive. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule();
  }

  stop(): void {
    this.running = false;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** The current cadence: fine while the rates were read within `readMs`. */
  private cadence(): number {
    return this.now() - this.readAt < this.readMs ? this.intervalMs : this.idleIntervalMs;
  }

  private schedule(): void {
    clearTimeout(this.timer);
    this.every = this.cadence();
    this.timer = setTimeout(() => {
      this.sample();
      this.schedule();
    }, this.every);
    this.timer.unref();
  }

  /** Takes one sample of every rule in force now (the timer calls it; tests call it after moving the clock). */
  sample(): void {
    const slot = this.seq % this.slots;
    this.times[slot] = this.now();
    const names = new Set(this.opts.rules());
    for (const name of this.rings.keys()) if (!names.has(name)) this.rings.delete(name);
    for (const name of names) {
      let ring = this.rings.get(name);
      if (ring === undefined)
        this.rings.set(name, (ring = { values: new Float64Array(this.slots * FIELDS), first: this.seq }));
      const c = this.opts.counts(name);
      const at = slot * FIELDS;
      ring.values[at] = c.allowed;
      ring.values[at + 1] = c.limited;
      ring.values[at + 2] = c.shadowLimited;
    }
    this.seq++;
  }

  /**
   * The rule's rates over the window, or zeros for a rule not sampled yet. `read` false: a peek (what the
   * replica publishes to the fleet) that does not make the sampling fine, as a person reading the page does.
   */
  rates(rule: string, window: RateWindow, read = true): DecisionRates {
    const now = this.now();
    if (read) {
      this.readAt = now;
      // Read while sampling coarsely: fine samples from now on (the coarse ones give this read its baseline).
      if (this.running && this.every !== this.intervalMs) this.schedule();
    }
    const ring = this.rings.get(rule);
    if (ring === undefined) return { allowed: 0, limited: 0, shadowLimited: 0, seconds: 0 };
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

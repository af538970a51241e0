/**
 * @module Drives log records through the gateway's own decision (pipeline/screen.ts, as `serve` and
 * `explain` run it): the table less what the log cannot decide, a memory store and a memory guard whose
 * clock is the log's time, and no upstream. Each record is a request from its logged address, with its
 * logged headers (X-Forwarded-For walked through `clients.trustedProxies` as the gateway walks it).
 * Bans count answers as serve counts them (guard/bans.ts countHits): the logged status where the table
 * lets the request through, the gateway's own refusal (429, 403) where it does not.
 */
import type http from 'node:http';
import type { Snapshot } from '../config/types.js';
import client from 'prom-client';
import { Guard } from '../guard/guard.js';
import { GuardMetrics } from '../guard/metrics.js';
import { MemoryGuardState, type BanCount, type BanStarted } from '../guard/state.js';
import { splitBanId } from '../guard/view.js';
import type { Peer } from '../identity/index.js';
import { MemoryStore } from '../limiter/memory/store.js';
import { Metrics } from '../observability/metrics.js';
import { bucketsFor, buildRequestPolicy, type RequestPolicy } from '../pipeline/policy.js';
import { RequestView } from '../pipeline/request-view.js';
import { screen, type ScreenContext, type Screened } from '../pipeline/screen.js';
import type { Decision } from '../pipeline/decision.js';
import { decidableTable, type Assumption } from './decidable.js';
import type { FormatFacts, LogRecord } from './record.js';
import { BanTally, HOUR_MS, LogTally, RuleTally } from './tally.js';

const NO_BYTES = Buffer.alloc(0);
const NO_RELEASE = (): void => {};
/** A stage's throw is the replay's: the run stops on it, as it would on any bug. */
const rethrow = (err: unknown): never => {
  throw err;
};
/** Replay never asks an upstream who owns a token: rules that need the account are not driven. */
const NO_INTROSPECTION = () => Promise.resolve({ kind: 'anonymous' as const });
/** Sweep expired buckets every this many records: the store's own timer runs on wall time, not the log's. */
const SWEEP_EVERY = 4096;
/** Peers remembered by address string; past this many distinct ones the memory starts over. */
const PEER_CACHE = 1_000_000;
/** The replaying guard logs nothing: what it starts is in the report. */
const QUIET = { warn: () => {}, info: () => {} };

/** The memory guard state, telling replay each answer it counts for a ban and each ban it starts. */
class TallyingGuardState extends MemoryGuardState {
  constructor(
    now: () => number,
    private readonly told: (c: BanCount, now: number, started: BanStarted | null) => void,
  ) {
    super(now);
  }

  override countBan(c: BanCount, now: number): Promise<BanStarted | null> {
    return super.countBan(c, now).then((started) => (this.told(c, now, started), started));
  }
}

export class Replayer {
  readonly log = new LogTally();
  /** Every rule of the table, in its order (rules the log cannot decide included, never counted). */
  readonly rules: RuleTally[];
  /** Rule name → why the log cannot decide it (absent: it can). */
  readonly undecidable = new Map<string, string>();
  /** Every ban of the table, in its order (those the log cannot decide included, never counted). */
  readonly bans: BanTally[];
  /** Ban name → why the log cannot decide it (absent: it can). */
  readonly undecidableBans = new Map<string, string>();
  /** Rules of the table the log cannot decide: a request no driven rule counted may still be theirs. */
  private readonly undecidedRules: ReadonlySet<string>;
  private readonly bansByName = new Map<string, BanTally>();
  private readonly guard: Guard | undefined;
  private readonly byName = new Map<string, RuleTally>();
  private readonly policy: RequestPolicy;
  private readonly store: MemoryStore;
  private readonly ctx: ScreenContext;
  private clock = 0;
  private sinceSweep = 0;
  /**
   * The resolver's own cache keeps 10,000 addresses (the gateway's bound against a flood of new
   * ones); a day's log has more clients than that and would miss on most lines.
   */
  private readonly peers = new Map<string, Peer>();

  constructor(
    readonly snapshot: Snapshot,
    format: FormatFacts,
    /** Told each record's decision, in log order (the agreement tests compare them with serve's). */
    private readonly onDecision?: (d: Decision, r: LogRecord) => void,
    /** What the log is silent on and replay is told to assume (`--assume`). */
    readonly assume: ReadonlySet<Assumption> = new Set(),
  ) {
    const { decided, reasons, banReasons } = decidableTable(snapshot, format, assume);
    this.rules = snapshot.rules.map((r) => new RuleTally(r.name, r.shadow));
    for (const t of this.rules) this.byName.set(t.name, t);
    for (const [name, why] of reasons) if (why !== null) this.undecidable.set(name, why);
    this.undecidedRules = new Set(this.undecidable.keys());
    this.bans = [...banReasons.keys()].map((name) => new BanTally(name));
    for (const t of this.bans) this.bansByName.set(t.name, t);
    for (const [name, why] of banReasons) if (why !== null) this.undecidableBans.set(name, why);
    this.policy = buildRequestPolicy(decided, NO_INTROSPECTION);
    const now = () => this.clock;
    // Every bucket of a day's log may be live at once: the bound is the table's, not the process's.
    this.store = new MemoryStore({ now, sweepIntervalMs: 0, maxKeys: Number.MAX_SAFE_INTEGER });
    this.guard =
      decided.config.bans.length === 0
        ? undefined
        : new Guard(new TallyingGuardState(now, (c, at, started) => this.banCounted(c, at, started)), QUIET, now);
    // The guard's own metrics (on a registry of this run) say which ban refused each request, as serve's do.
    if (this.guard !== undefined)
      this.guard.metrics = new GuardMetrics(
        new client.Registry(),
        () => null,
        () => [],
      );
    this.ctx = { store: this.store, metrics: new Metrics({ collectDefault: false }), now, guard: this.guard };
  }

  /** Decides one record; a promise only when the decision awaited the store. */
  replay(r: LogRecord): void | Promise<void> {
    const log = this.log;
    log.lines++;
    // The log's clock never goes back: nginx logs a request when it ends, so lines may be a little out of order.
    if (r.time > this.clock) this.clock = r.time;
    if (r.time < log.first) log.first = r.time;
    if (r.time > log.last) log.last = r.time;
    if (++this.sinceSweep === SWEEP_EVERY) {
      this.sinceSweep = 0;
      this.store.sweepStep();
    }
    const peer = this.peerOf(r.remoteAddr);
    if (peer.client.address === '') {
      log.noAddress++;
      return;
    }
    const head = {
      method: r.method,
      url: r.target,
      headers: r.headers as http.IncomingHttpHeaders,
      rawHeaders: rawHeaders(r.headers),
    };
    const v = new RequestView(head, this.policy, peer);
    return screen(this.ctx, v, NO_BYTES, undefined, {
      screened: (s) => this.decided(s, r),
      failed: rethrow,
      held: NO_RELEASE,
    });
  }

  /** Counts the decision, then the answer for the bans it matched: the logged status where admitted, else the gateway's. */
  private decided(s: Screened, r: LogRecord): void {
    this.onDecision?.(s.decision, r);
    // A credential the log shows (a query's access_token, a logged Authorization header): the request
    // was decided as one without an account (replay asks no upstream), which `anonymous` does not claim.
    if (s.view.token !== null && this.assume.has('anonymous')) this.log.credentialShown++;
    this.tally(s, r.time);
    if (s.banHits !== null && this.guard !== undefined)
      this.guard.bans.countHits(s.banHits, s.decision.admit ? (r.status ?? 0) : s.decision.status);
  }

  /** Told by the guard's state (in a microtask: `at` is the count's time, not the clock's by then). */
  private banCounted(c: BanCount, at: number, started: BanStarted | null): void {
    const { ban, key } = splitBanId(c.id);
    const t = this.bansByName.get(ban);
    if (t === undefined) return;
    t.counted++;
    if (started !== null) t.start(Math.floor(at / HOUR_MS), key);
  }

  private peerOf(addr: string): Peer {
    let peer = this.peers.get(addr);
    if (peer === undefined) {
      if (this.peers.size >= PEER_CACHE) this.peers.clear();
      this.peers.set(addr, (peer = this.policy.resolveIp.peer(addr)));
    }
    return peer;
  }

  /** Counts a decision under each rule that counted it (the bucket key of each that would have limited it). */
  private tally(s: Screened, time: number): void {
    const d = s.decision;
    const outcome = d.outcome;
    if (d.kind === 'limited') this.log.limited++;
    if (outcome === undefined || d.rules.length === 0) {
      if (d.kind === 'unmatched' && this.matchesUndecided(s)) this.log.outcome('undecidable');
      else this.log.outcome(d.kind);
      return;
    }
    const hour = Math.floor(time / HOUR_MS);
    let keys: readonly { key: string }[] | null = null;
    for (let i = 0; i < d.rules.length; i++) {
      const limited = outcome.buckets[i]!.limited;
      // The bucket keys, found again only for a request some rule limits (the allowed ones need none).
      if (limited) keys ??= bucketsFor(this.policy, s.view.rules.limits, s.view, true).specs;
      this.byName.get(d.rules[i]!.name)!.count(hour, limited ? keys![i]!.key : null);
    }
  }

  /** Whether a rule the log cannot decide matches the request's route: not counted, but not unmatched either. */
  private matchesUndecided(s: Screened): boolean {
    if (this.undecidedRules.size === 0) return false;
    for (const rule of this.snapshot.matcher.match(s.view.method, s.view.path))
      if (this.undecidedRules.has(rule.name)) return true;
    return false;
  }

  /** Ends the run: the requests each ban refused are read from the guard's metric first. */
  async close(): Promise<void> {
    const refused = await this.guard?.metrics?.bannedRequests.get();
    for (const v of refused?.values ?? []) {
      const t = this.bansByName.get(String(v.labels.ban));
      if (t !== undefined) t.refused += v.value;
    }
    await Promise.all([this.store.close(), this.guard?.close()]);
  }
}

function rawHeaders(headers: Record<string, string>): string[] {
  const raw: string[] = [];
  for (const name in headers) raw.push(name, headers[name]!);
  return raw;
}

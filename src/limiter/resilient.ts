/**
 * @module The fault policy around a remote store: a circuit breaker per Redis master, and each
 * bucket's `onError`.
 *
 * While the master deciding a request fails, every bucket follows its spec's `onError`:
 *   - `deny`:  the whole request fails with StoreUnavailableError (the gateway answers 503);
 *   - `local`: the bucket is counted in-process (local-fallback.ts: seeded from what the store last
 *              reported, split by `store.gateways`, and written back to the store once it is back);
 *   - `allow`: fail open: the bucket is reported allowed and full (remaining = limit), not counted.
 * In one request, deny wins over everything; otherwise local buckets are counted locally (and may
 * reject) and allow buckets are skipped.
 *
 * Failure is per master (breaker.ts): the primary says which master decides a request (`nodesOf`: the
 * owner of its slot in the cluster's slot map; one node for a single or Sentinel-managed Redis), and
 * only that master's breaker counts the failure, so a dead master sends only its own keys to the fault
 * policy. A request whose buckets span masters goes to the store only while all their breakers are
 * closed (probing is a single master's business), and its failure counts only against the masters
 * that failed (the store names them; the others answered). When the primary reports a promotion (a replica took over a master's slots), the old master's
 * breaker is dropped: its keys are decided by the new master, whose breaker starts closed.
 *
 * Waiting: this layer adds none. The primary must bound its own calls (RedisStore does, by
 * `store.timeout`); while a breaker is open, its keys' decisions are local and immediate.
 */
import { DEFAULT_BREAKER, type BreakerOptions, type CircuitState } from './breaker.js';
import { systemClock, type Clock } from './clock.js';
import { StoreError } from './errors.js';
import { MasterBreakers, ONE_NODE } from './master-breakers.js';
import { decideWithoutStore, LocalFallback, peekWithoutStore, type Touched } from './local-fallback.js';
import { readOutcome, readThrough } from './read.js';
import {
  StoreUnavailableError,
  type BucketSpec,
  type BucketState,
  type ConsumeOutcome,
  type PrimaryStore,
  type Store,
  type StoreEvent,
} from './types.js';

export type { BreakerOptions, CircuitState, StoreOp } from './breaker.js';
export type { PrimaryStore, StoreEvent } from './types.js';

export interface ResilientStoreOptions {
  /** Where `onError: local` buckets are counted while the primary fails: a MemoryStore. */
  readonly fallback: Store;
  /** Gateways sharing the store: the local count of a bucket starts from its share of what the store had left. */
  readonly gateways?: number;
  readonly breaker?: Partial<BreakerOptions>;
  readonly onEvent?: (e: StoreEvent) => void;
  /** The breakers' time and timers (tests: a fake clock). */
  readonly clock?: Clock;
}

export interface ResilientStore extends Store {
  /** True while some decisions are made by the fault policy (a master is failing or its breaker open). */
  readonly fallbackActive: boolean;
  /** The worst breaker state over the masters: open, else half-open, else closed. */
  readonly circuit: CircuitState;
  /** Masters whose keys follow the fault policy now. */
  readonly failingNodes: readonly string[];
  /** The gateways sharing the store now: the local fallback's share follows it. */
  setGateways(n: number): void;
}

const ONE: readonly string[] = [ONE_NODE];

class Resilient implements ResilientStore {
  private readonly masters: MasterBreakers;
  private readonly local: LocalFallback;
  private readonly emit: (e: StoreEvent) => void;
  private readonly clock: Clock;

  constructor(
    private readonly primary: PrimaryStore,
    o: ResilientStoreOptions,
  ) {
    const opts: BreakerOptions = {
      failureThreshold: Math.max(1, o.breaker?.failureThreshold ?? DEFAULT_BREAKER.failureThreshold),
      openMs: Math.max(1, o.breaker?.openMs ?? DEFAULT_BREAKER.openMs),
    };
    this.emit = o.onEvent ?? (() => {});
    this.clock = o.clock ?? systemClock;
    this.masters = new MasterBreakers(primary, opts, this.clock, this.emit);
    this.local = new LocalFallback(o.fallback, {
      ...(o.gateways !== undefined ? { gateways: o.gateways } : {}),
      now: () => this.clock.now(),
    });
    primary.onPromotion?.((from, to, node) => this.masters.promoted(from, to, node));
  }

  get fallbackActive(): boolean {
    return this.masters.failing.size > 0;
  }

  setGateways(n: number): void {
    this.local.setGateways(n);
  }

  get failingNodes(): readonly string[] {
    return [...this.masters.failing];
  }

  get circuit(): CircuitState {
    return this.masters.circuit;
  }

  consume(specs: readonly BucketSpec[]): Promise<ConsumeOutcome> {
    const debts = this.local.debtsOf(specs);
    return this.viaPrimary(
      'consume',
      specs,
      debts === null ? () => this.primary.consume(specs) : () => this.writeBackThen(debts, specs),
      (err, node) => {
        if (debts !== null) this.local.unwritten(debts);
        return this.degradedConsume(specs, err, node);
      },
      (out) => this.local.remember(specs, out),
    );
  }

  /**
   * The store's refund for a decision the store made. A decision of the fallback (its local count, or
   * `allow`) is not given back: while the store fails, a request refused after it stays counted locally
   * (fewer admissions during the outage, never more).
   */
  refund(specs: readonly BucketSpec[], outcome: ConsumeOutcome): Promise<void> {
    if (outcome.decider === 'fallback' || this.primary.refund === undefined) return Promise.resolve();
    return this.primary.refund(specs, outcome).catch(() => undefined);
  }

  peek(spec: BucketSpec): Promise<BucketState> {
    return this.viaPrimary(
      'peek',
      [spec],
      () => this.primary.peek(spec),
      (err) => this.degradedPeek(spec, err),
    );
  }

  /** Every bucket read (the primary's read, with its clock), or each by the fault policy's peek. */
  read(specs: readonly BucketSpec[]): Promise<ConsumeOutcome> {
    return this.viaPrimary(
      'peek',
      specs,
      () => readThrough(this.primary, specs, () => this.clock.now()),
      (err) =>
        Promise.all(specs.map((spec) => this.degradedPeek(spec, err))).then((buckets) =>
          readOutcome(specs, buckets, this.clock.now(), 'fallback'),
        ),
    );
  }

  /** Resets the local count too; fails (503 for the admin API) when the shared bucket could not be reset. */
  async reset(spec: BucketSpec): Promise<void> {
    await this.local.store.reset(spec);
    const node = this.nodesOf([spec])[0]!;
    const breaker = this.masters.breaker(node);
    if (!breaker.admit()) {
      this.emit({ type: 'error', op: 'reset', reason: 'circuit_open', node });
      throw new StoreUnavailableError('store unavailable (circuit open): bucket not reset');
    }
    try {
      await this.primary.reset(spec);
      breaker.succeeded();
    } catch (err) {
      breaker.failed('reset', err);
      throw new StoreUnavailableError('store unavailable: bucket not reset', { cause: err });
    }
  }

  async close(): Promise<void> {
    this.masters.close();
    await Promise.all([this.primary.close(), this.local.store.close()]);
  }

  /**
   * Asks the deciding master when its breaker allows it, else (or when it fails) answers by the fault
   * policy. `err` is undefined when the breaker kept the call from the master. Not an async function:
   * with the breaker closed, this layer is one reaction on the primary's promise, no frame of its own.
   */
  private viaPrimary<T>(
    op: 'consume' | 'peek',
    specs: readonly BucketSpec[],
    call: () => Promise<T>,
    degraded: (err: unknown, node: string) => Promise<T>,
    answered?: (out: T) => void,
  ): Promise<T> {
    const nodes = this.nodesOf(specs);
    if (nodes.length > 1) return this.viaMasters(nodes, op, call, degraded, answered);
    const breaker = this.masters.breaker(nodes[0]!);
    if (!breaker.admit()) {
      this.emit({ type: 'error', op, reason: 'circuit_open', node: nodes[0]! });
      if (op === 'consume') breaker.skipped();
      return degraded(undefined, nodes[0]!);
    }
    const failed = (err: unknown): Promise<T> => {
      breaker.failed(op, err);
      return degraded(err, nodes[0]!);
    };
    let pending: Promise<T>;
    try {
      pending = call();
    } catch (err) {
      return failed(err);
    }
    return pending.then((out) => {
      breaker.succeeded();
      if (this.masters.awaitingShared.size > 0) this.masters.decidedBy(nodes[0]!);
      answered?.(out);
      return out;
    }, failed);
  }

  /** A request whose buckets span masters: only while every one of their breakers is closed. */
  private async viaMasters<T>(
    nodes: readonly string[],
    op: 'consume' | 'peek',
    call: () => Promise<T>,
    degraded: (err: unknown, node: string) => Promise<T>,
    answered?: (out: T) => void,
  ): Promise<T> {
    const breakers = nodes.map((n) => this.masters.breaker(n));
    const shut = breakers.findIndex((b) => b.circuit !== 'closed');
    if (shut !== -1) {
      this.emit({ type: 'error', op, reason: 'circuit_open', node: nodes[shut]! });
      if (op === 'consume') breakers[shut]!.skipped();
      return degraded(undefined, nodes[shut]!);
    }
    try {
      const out = await call();
      for (const b of breakers) b.succeeded();
      if (this.masters.awaitingShared.size > 0) for (const n of nodes) this.masters.decidedBy(n);
      answered?.(out);
      return out;
    } catch (err) {
      const failed = err instanceof StoreError && err.nodes !== undefined ? err.nodes : nodes;
      for (let i = 0; i < nodes.length; i++) {
        if (failed.includes(nodes[i]!)) breakers[i]!.failed(op, err);
        else breakers[i]!.succeeded();
      }
      return degraded(err, failed[0] ?? nodes[0]!);
    }
  }

  /**
   * Writes what these buckets admitted locally to the store (shadow charges, capped at the room left),
   * then asks for the decision: a recovered master does not hand out again the room already used.
   */
  private async writeBackThen(debts: readonly Touched[], specs: readonly BucketSpec[]): Promise<ConsumeOutcome> {
    const charges = LocalFallback.charges(debts, specs);
    if (charges.length > 0) {
      const first = await this.primary.consume(charges);
      // A shadow charge larger than the room left is not taken at all: take the room instead. Redis
      // reports a limited bucket's remaining as 0, not the room, so the room is read (a debt larger than
      // the room was dropped whole: after a promotion, 75 of 50 admitted in a window).
      const rest: BucketSpec[] = [];
      for (let i = 0; i < charges.length; i++) {
        const b = first.buckets[i]!;
        if (!b.limited) continue;
        const room = b.remaining > 0 ? b.remaining : (await this.primary.peek(charges[i]!)).remaining;
        if (room > 0) rest.push({ ...charges[i]!, cost: room });
      }
      if (rest.length > 0) await this.primary.consume(rest);
    }
    await this.local.written(debts);
    return this.primary.consume(specs);
  }

  private nodesOf(specs: readonly BucketSpec[]): readonly string[] {
    return this.primary.nodesOf?.(specs) ?? ONE;
  }

  /** Applies each bucket's onError to a request the primary could not decide (local-fallback.ts). */
  private degradedConsume(specs: readonly BucketSpec[], cause: unknown, node: string): Promise<ConsumeOutcome> {
    return decideWithoutStore(this.local, specs, cause, this.clock.now(), this.rejected).then(
      (out) => {
        this.emit({ type: 'fallback_decision', node, result: out.allowed ? 'admitted' : 'refused' });
        return out;
      },
      (err: unknown) => {
        this.emit({ type: 'fallback_decision', node, result: 'unavailable' });
        throw err;
      },
    );
  }

  private degradedPeek(spec: BucketSpec, cause: unknown): Promise<BucketState> {
    return peekWithoutStore(this.local, spec, cause, this.clock.now());
  }

  /** Reports a local rejection of the fallback. */
  private readonly rejected = (): void => this.emit({ type: 'local_rejection' });
}

export function createResilientStore(primary: PrimaryStore, opts: ResilientStoreOptions): ResilientStore {
  return new Resilient(primary, opts);
}

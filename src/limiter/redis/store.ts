/**
 * @module The Redis and Redis Cluster store: exact, all-or-nothing counting by one Lua call per slot.
 *
 * Redis holds the same 3-integer state as the memory store and the Lua scripts in `lua/` compute the
 * same integer formulas as `algorithms.ts`, with Redis TIME as the clock, so every gateway replica sees
 * one count and one time. A request's buckets are charged by one script call: atomically on a single
 * Redis, and on a cluster atomically per slot (each identity's keys carry a hash tag, so usually the
 * whole request is one slot) with reserve-then-refund across slots (cross-slot.ts).
 *
 * Every call is bounded by `timeoutMs`, after which it rejects with StoreTimeoutError and its late reply
 * is ignored. What to do then is the fault policy's business (resilient.ts), not this module's.
 * Connection setup is in connection.ts, the script encoding in codec.ts, one-slot calls (and their
 * batching, batcher.ts) in same-slot.ts.
 */
import type { Cluster, Redis } from 'ioredis';
import { CrossSlot, groupBySlot, settleWithin } from './cross-slot.js';
import type { StoreError } from '../errors.js';
import { refundCharges } from './refund-calls.js';
import { luaScripts, parsePeek, type Arg } from './codec.js';
import { createRedisClient, isCluster, whenReady, type RedisClient } from './connection.js';
import { rawScript, type ScriptCall } from './raw-script.js';
import { clusterTopology, singleTopology, type PromotionListener, type Topology } from './topology.js';
import { sentinelWatchFor } from './sentinel-watch.js';
import { SameSlot } from './same-slot.js';
import { keySlot } from './slot.js';
import { parseStoreUrl, StoreUrlError } from '../../config/store-url.js';
import { pingStore } from './ping.js';
import { settleCall } from './settle.js';
import type { RedisStoreOptions } from './store-options.js';
import type { BucketSpec, BucketState, ConsumeOutcome, Store } from '../types.js';
import { timedReadOutcome, type TimedState } from '../read.js';

export type { RedisStoreOptions } from './store-options.js';

export { luaScripts, encodeBucketParams } from './codec.js';
export { MAX_BATCH_REQUESTS } from './batcher.js';

type ScriptFn = (...args: Arg[]) => Promise<unknown>;

export class RedisStore implements Store {
  readonly kind: 'redis' | 'redis-cluster' | 'redis-sentinel';
  /** The last connection error ioredis reported (it reconnects by itself). */
  lastError: Error | undefined;
  /** Batches sent and the requests they carried since start (with batching off, nothing is counted here). */
  batchesSent = 0;
  batchedRequests = 0;

  private readonly client: RedisClient;
  private readonly topology: Topology;
  /** The script commands; each takes the number of keys as its first argument (see `script`). */
  private readonly consumeFn: ScriptFn;
  private readonly peekFn: ScriptFn;
  private readonly refundFn: ScriptFn;
  private readonly onRefundError: ((err: StoreError) => void) | undefined;
  private readonly giveBackCall: ScriptCall;
  private readonly sameSlot: SameSlot;
  private readonly crossSlot: CrossSlot;
  private readonly prefix: string;
  private readonly timeoutMs: number;
  private readonly now: (() => number) | undefined;

  constructor(opts: RedisStoreOptions) {
    const url = parseStoreUrl(opts.url);
    if (url.kind === 'memory') throw new StoreUrlError(opts.url, 'not a Redis URL');
    this.kind = url.kind;
    this.prefix = `${opts.prefix}:`;
    this.timeoutMs = opts.timeoutMs;
    this.now = opts.now;
    const watch = sentinelWatchFor(url, opts.sentinelPassword);
    this.client = createRedisClient(url, {
      connectTimeoutMs: opts.connectTimeoutMs ?? 2_000,
      timeoutMs: opts.timeoutMs,
      ...(opts.sentinelPassword !== undefined ? { sentinelPassword: opts.sentinelPassword } : {}),
      ...(watch !== undefined ? { natMap: watch.map } : {}),
    });
    this.topology =
      url.kind === 'redis-cluster'
        ? clusterTopology(this.client as Cluster)
        : singleTopology(
            this.client as Redis,
            url.kind === 'redis' ? (url.socket ?? `${url.node.host}:${url.node.port}`) : url.name,
            watch,
          );
    // Without a listener an 'error' event would crash the process; reconnection is automatic.
    this.client.on('error', (err: Error) => {
      this.lastError = err;
    });
    this.consumeFn = this.script('rgConsume', luaScripts.consume);
    this.peekFn = this.script('rgPeek', luaScripts.peek, true);
    this.refundFn = this.script('rgRefund', luaScripts.refund);
    // A lease's give-back is one call per expired lease: the prebuilt command where it can go.
    this.giveBackCall = isCluster(this.client)
      ? (args) => this.refundFn(...args)
      : rawScript(this.client, luaScripts.refund);
    const onBatch = opts.onBatch;
    this.sameSlot = new SameSlot({
      ...this.sameSlotCalls(),
      clock: () => this.clockArg(),
      settle: (p, what, budgetMs, answered, failed) => this.settle(p, what, budgetMs, answered, failed),
      timeoutMs: opts.timeoutMs,
      batching: opts.batching ?? url.kind !== 'redis-cluster',
      onBatch: (n) => {
        this.batchesSent++;
        this.batchedRequests += n;
        onBatch?.(n);
      },
    });
    this.onRefundError = opts.onRefundError;
    this.crossSlot = new CrossSlot({
      consumeFn: this.consumeFn,
      refundFn: this.refundFn,
      clock: () => this.clockArg(),
      bounded: (p, what) => this.bounded(p, what),
      timeoutMs: opts.timeoutMs,
      nodeOfKey: (key) => this.topology.nodeOf(key),
      ...(opts.onRefundError ? { onRefundError: opts.onRefundError } : {}),
    });
    this.client.connect().catch((err: unknown) => {
      this.lastError = err instanceof Error ? err : new Error(String(err));
    });
  }

  /** Cross-slot refunds that failed or timed out since start. */
  get refundFailures(): number {
    return this.crossSlot.refundFailures;
  }

  /**
   * The command running `lua`: EVALSHA, falling back to EVAL on NOSCRIPT (e.g. after a restart). Its
   * first argument is the number of keys, then the keys, then ARGV; on a cluster ioredis routes it by
   * its keys (which the caller keeps in one slot).
   */
  private script(name: string, lua: string, readOnly = false): ScriptFn {
    this.client.defineCommand(name, { lua, readOnly });
    const fn = (this.client as unknown as Record<string, ScriptFn>)[name]!;
    return fn.bind(this.client);
  }

  /**
   * The one-slot calls: prebuilt commands on a single or Sentinel-managed Redis (raw-script.ts, the
   * hot path); ioredis's script helper on a cluster, which routes each command by its keys.
   */
  private sameSlotCalls(): { consume: ScriptCall; consumeBatch: ScriptCall } {
    if (!isCluster(this.client))
      return {
        consume: rawScript(this.client, luaScripts.consume),
        consumeBatch: rawScript(this.client, luaScripts.consumeBatch),
      };
    const consume = this.consumeFn;
    const consumeBatch = this.script('rgConsumeBatch', luaScripts.consumeBatch);
    return { consume: (args) => consume(...args), consumeBatch: (args) => consumeBatch(...args) };
  }

  /** Resolves once connected (cluster: slots known); rejects with a connection StoreError after `waitMs`. */
  ready(waitMs = 10_000): Promise<void> {
    return whenReady(this.client, waitMs, () => this.lastError);
  }

  /** Calls `fn` once, the next time the connection becomes ready. */
  onReady(fn: () => void): void {
    this.client.once('ready', fn);
  }

  /** See ping.ts. */
  ping(node?: string): Promise<void> {
    return pingStore(this.client, this.topology, (p, what) => this.bounded(p, what), node);
  }

  /** The masters that decide these buckets: each slot's owner, once (see topology.ts). */
  nodesOf(specs: readonly BucketSpec[]): readonly string[] {
    return this.topology.nodesOf(this.prefix, specs);
  }

  /** Tells `fn` of every promotion seen (a replica that took over a master's slots, or a new Sentinel master). */
  onPromotion(fn: PromotionListener): void {
    this.topology.onPromotion(fn);
  }

  /** True when every key has a master to go to (cluster: all slots covered; single: connected). */
  covered(): boolean {
    return this.topology.covered();
  }

  consume(specs: readonly BucketSpec[]): Promise<ConsumeOutcome> {
    const n = specs.length;
    if (n === 0)
      return Promise.resolve({ allowed: true, decider: 'store', now: this.now?.() ?? Date.now(), buckets: [] });
    const keys: string[] = new Array(n);
    for (let i = 0; i < n; i++) keys[i] = this.prefix + specs[i]!.key;
    if (this.kind === 'redis-cluster') {
      const groups = groupBySlot(keys);
      if (groups) return this.crossSlot.consume(specs, keys, groups);
    }
    return this.sameSlot.consume(this.kind === 'redis-cluster' ? keySlot(keys[0]!) : 0, specs, keys);
  }

  async peek(spec: BucketSpec): Promise<BucketState> {
    return (await this.peekAt(spec)).state;
  }

  /** One peek per bucket, as one outcome at the store's clock (read.ts). */
  read(specs: readonly BucketSpec[]): Promise<ConsumeOutcome> {
    return Promise.all(specs.map((spec) => this.peekAt(spec))).then((replies) => timedReadOutcome(specs, replies));
  }

  private async peekAt(spec: BucketSpec): Promise<TimedState> {
    const r = this.peekFn(
      1,
      this.prefix + spec.key,
      this.clockArg(),
      spec.algorithm,
      spec.limit,
      spec.periodMs,
      spec.cost,
    );
    return parsePeek(await this.bounded(r, 'peek'));
  }

  /**
   * Gives back `tokens` unspent lease tokens of one bucket, charged at store time `chargedAt` (lease.ts):
   * refund.lua takes them off the count they were charged in, never more than the charge still weighs.
   * Resolves to whether anything was given back.
   */
  async giveBack(spec: BucketSpec, tokens: number, chargedAt: number): Promise<boolean> {
    // The refund key of a window charge is its window's start; a token bucket's only needs to be > 0.
    const a = spec.algorithm === 'token-bucket' ? 1 : chargedAt - (chargedAt % spec.periodMs);
    const r = await this.bounded(
      this.giveBackCall([
        1,
        this.prefix + spec.key,
        this.clockArg(),
        chargedAt,
        spec.algorithm,
        spec.limit,
        spec.periodMs,
        tokens,
        a,
      ]),
      'refund',
    );
    return r === 1;
  }

  /** Gives back what an allowed consume charged (the Store contract's refund; refund-calls.ts). */
  refund(specs: readonly BucketSpec[], outcome: ConsumeOutcome): Promise<void> {
    if (!outcome.allowed) return Promise.resolve();
    const spread =
      this.kind === 'redis-cluster' && specs.length > 1 && groupBySlot(specs.map((s) => this.prefix + s.key)) !== null;
    return refundCharges(specs, outcome, spread, (s, tokens, at) => this.giveBack(s, tokens, at), this.onRefundError);
  }

  async reset(spec: BucketSpec): Promise<void> {
    await this.bounded(this.client.del(this.prefix + spec.key), 'reset');
  }

  /** Waits (bounded) for refunds still in flight, so a closing replica does not leave charges behind. */
  async close(): Promise<void> {
    this.topology.close();
    this.sameSlot.drain();
    await this.crossSlot.settle();
    await settleWithin(this.client.quit(), this.timeoutMs);
    this.client.disconnect();
  }

  /** '' makes the scripts read Redis TIME; a number is the tests' scripted time. */
  private clockArg(): string {
    return this.now ? String(this.now()) : '';
  }

  /**
   * Bounds a call by the timeout; a late reply or error is dropped (the promise is already settled). A
   * failure other than a script error makes the topology look for a new master.
   */
  private bounded<T>(p: Promise<T>, what: string, budgetMs = this.timeoutMs): Promise<T> {
    return new Promise<T>((resolve, reject) => this.settle(p, what, budgetMs, resolve, reject));
  }

  /** `bounded` without a promise of its own (see settle.ts). */
  private settle<T>(
    p: Promise<T>,
    what: string,
    budgetMs: number,
    answered: (v: T) => void,
    failed: (err: StoreError) => void,
  ): void {
    settleCall(p, what, budgetMs, this.timeoutMs, this.topology, answered, failed);
  }
}

export function createRedisStore(opts: RedisStoreOptions): RedisStore {
  return new RedisStore(opts);
}

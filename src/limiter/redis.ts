/**
 * @module The Redis and Redis Cluster store: exact, all-or-nothing counting by one Lua call per slot.
 *
 * Redis holds the same 3-integer state as the memory store and the Lua scripts in `lua/` compute the
 * same integer formulas as `algorithms.ts`, with Redis TIME as the clock, so every gateway replica sees
 * one count and one time. A request's buckets are charged by one script call: atomically on a single
 * Redis, and on a cluster atomically per slot (each identity's keys carry a hash tag, so usually the
 * whole request is one slot) with reserve-then-refund across slots.
 *
 * Every call is bounded by `timeoutMs`, after which it rejects with StoreTimeoutError and its late reply
 * is ignored; the offline queue is off, so while Redis is unreachable calls fail at once instead of
 * queueing. What to do then is the fault policy's business (resilient.ts), not this module's.
 */
import { readFileSync } from 'node:fs';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { StoreError, StoreTimeoutError, toStoreError } from './errors.js';
import { keySlot } from './slot.js';
import type { BucketSpec, BucketState, ConsumeOutcome, Store } from './types.js';

export interface RedisStoreOptions {
  /** `redis://`, `rediss://` (TLS), or `redis-cluster://h:p,h:p` (`rediss-cluster://` for TLS), with optional `user:pass@`. */
  readonly url: string;
  /** Prepended to every bucket key as `${prefix}:${spec.key}`. */
  readonly prefix: string;
  /** Upper bound of every store call, in ms. */
  readonly timeoutMs: number;
  /** Tests only: overrides Redis TIME so that scripted times apply. Production reads the server clock. */
  readonly now?: () => number;
  /**
   * Batch the consume calls of one event-loop turn into one script call (see `enqueue`). Default: on
   * for a single Redis, off for a cluster, where the requests of different clients fall in different
   * slots and so rarely share a batch, and the wait for the end of the turn only costs throughput and
   * p99 (both measured with bench/redis-store.ts, which compares the two).
   */
  readonly batching?: boolean;
  /** TCP connect timeout for (re)connection attempts; requests never wait for it (no offline queue). */
  readonly connectTimeoutMs?: number;
  /** Called when a cross-slot refund fails (the charge then stands: under-admission until it expires). */
  readonly onRefundError?: (err: StoreError) => void;
}

/**
 * ioredis auto-pipelining stays off: bench/redis-store.ts measured no throughput gain from it and about
 * twice the p99 latency, and batching (below) does what it would and more. It would also break the
 * batch command on a cluster, which it routes by the first argument (the key count).
 */
const AUTO_PIPELINING = false;

/** The shared prelude (the algorithms) is prepended to each script so the formulas exist once in Lua. */
const LIB = readFileSync(new URL('./lua/lib.lua', import.meta.url), 'utf8');
const CONSUME_LUA = `${LIB}\n${readFileSync(new URL('./lua/consume.lua', import.meta.url), 'utf8')}`;
const PEEK_LUA = `${LIB}\n${readFileSync(new URL('./lua/peek.lua', import.meta.url), 'utf8')}`;
const REFUND_LUA = `${LIB}\n${readFileSync(new URL('./lua/refund.lua', import.meta.url), 'utf8')}`;
const CONSUME_BATCH_LUA = `${LIB}\n${readFileSync(new URL('./lua/consume-batch.lua', import.meta.url), 'utf8')}`;

/** The script texts as sent to Redis (prelude included), for tests that drive them directly. */
export const luaScripts = { consume: CONSUME_LUA, consumeBatch: CONSUME_BATCH_LUA, peek: PEEK_LUA, refund: REFUND_LUA } as const;

/**
 * Most requests one batch script carries (see `enqueue`). Bounds the time one script holds Redis (a
 * few µs per bucket) and the size of one command; more waiting requests go as further batches at once.
 */
export const MAX_BATCH_REQUESTS = 64;

/** The consume calls of one slot: queued while a batch of theirs is in flight. */
interface Lane {
  queued: PendingConsume[];
  /** When the oldest queued call was made (epoch ms): its wait counts against its timeout. */
  since: number;
  inFlight: number;
}

/** A consume call waiting for its batch to be sent. */
interface PendingConsume {
  readonly specs: readonly BucketSpec[];
  readonly keys: readonly string[];
  readonly resolve: (outcome: ConsumeOutcome) => void;
  readonly reject: (err: unknown) => void;
}

type Arg = string | number | Buffer;
type ScriptFn = (...args: Arg[]) => Promise<unknown>;

const PLAIN_STRIDE = 4;
/** Reserve mode adds: charged `a` (−1: not charged), remaining and resetAt before the charge. */
const RESERVE_STRIDE = 7;

export class RedisStore implements Store {
  readonly kind: 'redis' | 'redis-cluster';
  /** Cross-slot refunds that failed or timed out since start. */
  refundFailures = 0;
  /** The last connection error ioredis reported (it reconnects by itself). */
  lastError: Error | undefined;

  private readonly client: Redis | Cluster;
  /** The script commands; each takes the number of keys as its first argument (see `script`). */
  private readonly consumeFn: ScriptFn;
  private readonly consumeBatchFn: ScriptFn;
  private readonly refundFn: ScriptFn;
  private readonly peekFn: ScriptFn;
  /** Consume calls waiting to be sent, by hash slot (always 0 on a single Redis). */
  private readonly lanes = new Map<number, Lane>();
  private flushScheduled = false;
  private readonly batching: boolean;
  /** Batches sent and the requests they carried since start (a batch of one is a plain consume call; with batching off, nothing is counted here). */
  batchesSent = 0;
  batchedRequests = 0;
  private readonly prefix: string;
  private readonly timeoutMs: number;
  private readonly now: (() => number) | undefined;
  private readonly onRefundError: ((err: StoreError) => void) | undefined;
  private readonly pendingRefunds = new Set<Promise<void>>();

  constructor(opts: RedisStoreOptions) {
    this.prefix = `${opts.prefix}:`;
    this.timeoutMs = opts.timeoutMs;
    this.now = opts.now;
    this.onRefundError = opts.onRefundError;
    this.batching = opts.batching ?? parseClusterUrl(opts.url) === null;
    const connectTimeout = opts.connectTimeoutMs ?? 2_000;
    // Reconnect quickly but without hammering a dead server; the breaker, not this, keeps requests fast.
    const retry = (times: number): number => Math.min(times * 100, 1_000);

    const cluster = parseClusterUrl(opts.url);
    if (cluster) {
      this.kind = 'redis-cluster';
      const redisOptions: RedisOptions = { connectTimeout, maxRetriesPerRequest: 0 };
      if (cluster.username !== undefined) redisOptions.username = cluster.username;
      if (cluster.password !== undefined) redisOptions.password = cluster.password;
      if (cluster.tls) redisOptions.tls = {};
      const clusterOptions: ClusterOptions = {
        lazyConnect: true,
        enableOfflineQueue: false,
        enableAutoPipelining: AUTO_PIPELINING,
        clusterRetryStrategy: retry,
        redisOptions,
        slotsRefreshTimeout: Math.max(1_000, opts.timeoutMs),
        // Redirect and failover retries happen inside ioredis; our deadline still bounds the call.
        retryDelayOnFailover: 50,
        retryDelayOnClusterDown: 50,
        retryDelayOnTryAgain: 50,
      };
      this.client = new Cluster(cluster.nodes, clusterOptions);
    } else {
      if (!/^rediss?:\/\//.test(opts.url)) throw new Error(`store url must be redis://, rediss:// or redis-cluster://: ${redact(opts.url)}`);
      this.kind = 'redis';
      this.client = new Redis(opts.url, {
        lazyConnect: true,
        enableOfflineQueue: false,
        // A command in flight when the connection drops fails at once instead of being replayed late.
        maxRetriesPerRequest: 0,
        enableAutoPipelining: AUTO_PIPELINING,
        connectTimeout,
        retryStrategy: retry,
      });
    }
    // Without a listener an 'error' event would crash the process; reconnection is automatic.
    this.client.on('error', (err: Error) => {
      this.lastError = err;
    });
    this.consumeFn = this.script('rgConsume', CONSUME_LUA);
    this.consumeBatchFn = this.script('rgConsumeBatch', CONSUME_BATCH_LUA);
    this.refundFn = this.script('rgRefund', REFUND_LUA);
    this.peekFn = this.script('rgPeek', PEEK_LUA, true);
    this.client.connect().catch((err: unknown) => {
      this.lastError = err instanceof Error ? err : new Error(String(err));
    });
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

  /** Resolves once connected (cluster: slots known); rejects with a connection StoreError after `waitMs`. */
  ready(waitMs = 10_000): Promise<void> {
    if (this.client.status === 'ready') return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const onReady = (): void => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.client.off('ready', onReady);
        reject(new StoreError('connection', `store not connected after ${waitMs} ms${this.lastError ? `: ${this.lastError.message}` : ''}`));
      }, waitMs);
      this.client.once('ready', onReady);
    });
  }

  /** One round trip to every master, bounded by the timeout: the breaker's recovery probe and /readyz. */
  async ping(): Promise<void> {
    if (this.client instanceof Cluster) {
      const masters = this.client.nodes('master');
      if (masters.length === 0) throw new StoreError('connection', 'store ping: no cluster master known');
      await this.bounded(Promise.all(masters.map((m) => m.ping())), 'ping');
    } else {
      await this.bounded(this.client.ping(), 'ping');
    }
  }

  consume(specs: readonly BucketSpec[]): Promise<ConsumeOutcome> {
    const n = specs.length;
    if (n === 0) return Promise.resolve({ allowed: true, now: this.now?.() ?? Date.now(), buckets: [] });
    const keys: string[] = new Array(n);
    for (let i = 0; i < n; i++) keys[i] = this.prefix + specs[i]!.key;
    if (this.kind === 'redis-cluster') {
      const groups = groupBySlot(keys);
      if (groups) return this.consumeAcrossSlots(specs, keys, groups);
    }
    return new Promise<ConsumeOutcome>((resolve, reject) => {
      if (!this.batching) this.sendOne({ specs, keys, resolve, reject });
      else this.enqueue(this.kind === 'redis-cluster' ? keySlot(keys[0]!) : 0, { specs, keys, resolve, reject });
    });
  }

  /**
   * Consume calls are not sent at once: those made in the same turn of the event loop (the requests
   * parsed from every socket that was readable) go as one batch script at the end of the turn
   * (setImmediate), and while a slot has a batch in flight, its new calls wait for that answer and
   * then go together. So the busier Redis is, the fuller each batch: one command, one write, one
   * wake-up of Redis and one reply serve many requests, which saves per-command work on both sides
   * (Redis CPU per request fell by about 40 % in the bench). At low load a batch holds one call and is
   * a plain consume with no added wait. Requests in a batch are charged in arrival order, each
   * all-or-nothing, so the counts are those of separate calls. A call that waited behind a batch is
   * sent with what is left of its `timeoutMs`, so no call waits longer than that in all.
   */
  private enqueue(slot: number, call: PendingConsume): void {
    let lane = this.lanes.get(slot);
    if (lane === undefined) {
      lane = { queued: [], since: 0, inFlight: 0 };
      this.lanes.set(slot, lane);
    }
    if (lane.queued.length === 0) lane.since = Date.now();
    lane.queued.push(call);
    if (lane.inFlight === 0) this.scheduleFlush();
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(this.flush);
  }

  /** Sends what every lane without a batch in flight has queued; forgets idle lanes. */
  private readonly flush = (): void => {
    this.flushScheduled = false;
    for (const [slot, lane] of this.lanes) {
      if (lane.inFlight > 0) continue;
      if (lane.queued.length === 0) this.lanes.delete(slot);
      else this.sendQueued(lane);
    }
  };

  /** Sends a lane's queued calls now, in batches of at most MAX_BATCH_REQUESTS. */
  private sendQueued(lane: Lane): void {
    const calls = lane.queued;
    lane.queued = [];
    const budgetMs = this.timeoutMs - (Date.now() - lane.since);
    if (budgetMs <= 0) {
      // Their time ran out while they waited: fail them unsent rather than charge buckets for nobody.
      for (const call of calls) call.reject(new StoreTimeoutError(this.timeoutMs, 'consume'));
      return;
    }
    const answered = (): void => {
      if (--lane.inFlight === 0 && lane.queued.length > 0) this.scheduleFlush();
    };
    for (let i = 0; i < calls.length; i += MAX_BATCH_REQUESTS) {
      lane.inFlight++;
      this.send(calls.length <= MAX_BATCH_REQUESTS ? calls : calls.slice(i, i + MAX_BATCH_REQUESTS), budgetMs, answered);
    }
  }

  /** One request's plain consume.lua call. */
  private sendOne({ specs, keys, resolve, reject }: PendingConsume, budgetMs = this.timeoutMs, done?: () => void): void {
    const n = specs.length;
    this.bounded(this.consumeFn(...consumeArgs(specs, keys, null, this.clockArg(), '')), 'consume', budgetMs).then(
      (reply) => {
        done?.();
        resolve(parsePlain(reply, n));
      },
      (err: unknown) => {
        done?.();
        reject(err);
      },
    );
  }

  private send(batch: readonly PendingConsume[], budgetMs: number, done: () => void): void {
    this.batchesSent++;
    this.batchedRequests += batch.length;
    if (batch.length === 1) {
      this.sendOne(batch[0]!, budgetMs, done);
      return;
    }
    // KEYS: every request's keys in turn. ARGV: clock, then per request its bucket count and parameters, packed.
    let keyCount = 0;
    for (const call of batch) keyCount += call.keys.length;
    const params = Buffer.allocUnsafe(8 * (batch.length + PARAMS_PER_BUCKET * keyCount));
    const args: Arg[] = new Array(1 + keyCount + 2);
    let k = 0;
    let offset = 0;
    args[k++] = keyCount;
    for (const call of batch) {
      for (const key of call.keys) args[k++] = key;
      offset = params.writeDoubleLE(call.specs.length, offset);
      offset = writeBucketParams(params, offset, call.specs, null);
    }
    args[k++] = this.clockArg();
    args[k++] = params;
    this.bounded(this.consumeBatchFn(...args), 'consume', budgetMs).then(
      (reply) => {
        done();
        if (!isIntArray(reply, 1 + batch.length + 4 * keyCount)) {
          const err = badReply('consume', reply);
          for (const call of batch) call.reject(err);
          return;
        }
        const now = reply[0]!;
        let o = 1;
        for (const call of batch) {
          const allowed = reply[o] === 1;
          const n = call.specs.length;
          call.resolve({ allowed, now, buckets: readBuckets(reply, o + 1, n) });
          o += 1 + PLAIN_STRIDE * n;
        }
      },
      (err: unknown) => {
        done();
        for (const call of batch) call.reject(err);
      },
    );
  }

  async peek(spec: BucketSpec): Promise<BucketState> {
    const r = await this.bounded(
      this.peekFn(1, this.prefix + spec.key, this.clockArg(), spec.algorithm, spec.limit, spec.periodMs, spec.cost),
      'peek',
    );
    if (!isIntArray(r, PLAIN_STRIDE)) throw badReply('peek', r);
    return { remaining: r[0]!, resetAt: r[1]!, limited: r[2] === 1, retryAt: r[3]! };
  }

  async reset(spec: BucketSpec): Promise<void> {
    await this.bounded(this.client.del(this.prefix + spec.key), 'reset');
  }

  /** Waits (bounded) for refunds still in flight, so a closing replica does not leave charges behind. */
  async close(): Promise<void> {
    // What still waits goes now, batch in flight or not: it is owed an answer before the connection closes.
    for (const lane of this.lanes.values()) if (lane.queued.length > 0) this.sendQueued(lane);
    if (this.pendingRefunds.size > 0) await settleWithin(Promise.all(this.pendingRefunds), this.timeoutMs);
    await settleWithin(this.client.quit(), this.timeoutMs);
    this.client.disconnect();
  }

  /**
   * A request whose buckets live in several slots cannot be one atomic script. Each slot is reserved in
   * parallel (charged all-or-nothing within the slot, as usual); if every slot admitted, that is the
   * answer; if any slot rejected, or failed, the slots that charged are refunded.
   *
   * Under-admission this allows, and nothing worse: between a slot's reservation and its refund (one
   * round trip, or up to `timeoutMs` when a slot is slow), other requests on that slot's buckets see the
   * reserved cost as taken and may be rejected although the request holding it is eventually rejected
   * too. A refund gives back at most what the charge still weighs (see refund.lua), so no bucket ever
   * ends up holding less than its admitted requests: window counts get the cost back exactly; a token
   * bucket keeps the reservation's age (about one round trip, in µs of refill) charged. If the refund
   * itself fails, the charge stays until the bucket's window or refill passes it — again fewer
   * admissions, never more.
   */
  private async consumeAcrossSlots(specs: readonly BucketSpec[], keys: readonly string[], groups: number[][]): Promise<ConsumeOutcome> {
    const started = Date.now();
    const clock = this.clockArg();
    const replies: (readonly number[] | undefined)[] = new Array(groups.length);
    let abandoned = false;
    const calls = groups.map((idx, g) =>
      this.consumeFn(...consumeArgs(specs, keys, idx, clock, 'reserve')).then((r) => {
        if (!isIntArray(r, 2 + RESERVE_STRIDE * idx.length)) throw badReply('consume', r);
        replies[g] = r;
        // The request already failed (timeout or another slot's error): this late charge is released.
        if (abandoned) void this.refund(specs, keys, idx, r);
        return r;
      }),
    );
    try {
      await this.bounded(Promise.all(calls), 'consume');
    } catch (err) {
      abandoned = true;
      for (let g = 0; g < groups.length; g++) {
        const r = replies[g];
        if (r) void this.refund(specs, keys, groups[g]!, r);
      }
      throw err;
    }

    let allowed = true;
    let now = 0;
    for (const r of replies) {
      if (r![0] !== 1) allowed = false;
      if (r![1]! > now) now = r![1]!;
    }
    const buckets: BucketState[] = new Array(specs.length);
    const refunds: Promise<void>[] = [];
    for (let g = 0; g < groups.length; g++) {
      const idx = groups[g]!;
      const r = replies[g]!;
      for (let k = 0; k < idx.length; k++) {
        const o = 2 + RESERVE_STRIDE * k;
        if (allowed || r[o + 4] === -1) {
          buckets[idx[k]!] = { remaining: r[o]!, resetAt: r[o + 1]!, limited: r[o + 2] === 1, retryAt: r[o + 3]! };
        } else {
          // Charged here but the request was rejected elsewhere: report it as it stood before (it had room).
          buckets[idx[k]!] = { remaining: r[o + 5]!, resetAt: r[o + 6]!, limited: false, retryAt: r[1]! };
        }
      }
      if (!allowed && r[0] === 1) refunds.push(this.refund(specs, keys, idx, r));
    }
    // Settle refunds before answering when time allows, so the caller sees the final counts; the
    // request is never held past its deadline for them (they go on in the background).
    const left = this.timeoutMs - (Date.now() - started);
    if (refunds.length > 0 && left > 0) await settleWithin(Promise.all(refunds), left);
    return { allowed, now, buckets };
  }

  /** Releases what one slot's reserve call charged. Never rejects: a failed refund only under-admits. */
  private refund(specs: readonly BucketSpec[], keys: readonly string[], idx: readonly number[], r: readonly number[]): Promise<void> {
    if (r[0] !== 1) return Promise.resolve();
    const refundKeys: string[] = [];
    // The group's `now` is when the reservation was made: token-bucket refunds depend on its age.
    const argv: Arg[] = [this.clockArg(), r[1]!];
    for (let k = 0; k < idx.length; k++) {
      const charged = r[2 + RESERVE_STRIDE * k + 4]!;
      if (charged === -1) continue;
      const spec = specs[idx[k]!]!;
      refundKeys.push(keys[idx[k]!]!);
      argv.push(spec.algorithm, spec.limit, spec.periodMs, spec.cost, charged);
    }
    if (refundKeys.length === 0) return Promise.resolve();
    const p = this.bounded(this.refundFn(refundKeys.length, ...refundKeys, ...argv), 'refund').then(
      () => undefined,
      (err: StoreError) => {
        this.refundFailures++;
        this.onRefundError?.(err);
      },
    );
    this.pendingRefunds.add(p);
    void p.then(() => this.pendingRefunds.delete(p));
    return p;
  }

  /** '' makes the scripts read Redis TIME; a number is the tests' scripted time. */
  private clockArg(): string {
    return this.now ? String(this.now()) : '';
  }

  /** Bounds a call by the timeout; a late reply or error is dropped (the promise is already settled). */
  private bounded<T>(p: Promise<T>, what: string, budgetMs = this.timeoutMs): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new StoreTimeoutError(this.timeoutMs, what)), budgetMs);
      p.then(
        (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(toStoreError(err, what));
        },
      );
    });
  }
}

export function createRedisStore(opts: RedisStoreOptions): RedisStore {
  return new RedisStore(opts);
}

/** consume.lua's algorithm codes (ALGORITHM in lua/lib.lua). */
const ALGORITHM_CODE: Readonly<Record<BucketSpec['algorithm'], number>> = { 'fixed-window': 0, 'sliding-window': 1, 'token-bucket': 2 };
/** Doubles per bucket in the packed parameters: algorithm code, limit, periodMs, cost, shadow. */
const PARAMS_PER_BUCKET = 5;

/**
 * Writes the parameters of the buckets `idx` (all when null) at `offset` as the scripts read them
 * (PARAMS in lua/lib.lua: five little-endian doubles each); returns the offset after them. One binary
 * argument instead of five strings per bucket: every argument costs ioredis a copy and an encoding
 * step, and Redis a Lua string and a number conversion.
 */
function writeBucketParams(buf: Buffer, offset: number, specs: readonly BucketSpec[], idx: readonly number[] | null): number {
  const n = idx ? idx.length : specs.length;
  for (let k = 0; k < n; k++) {
    const spec = specs[idx ? idx[k]! : k]!;
    offset = buf.writeDoubleLE(ALGORITHM_CODE[spec.algorithm], offset);
    offset = buf.writeDoubleLE(spec.limit, offset);
    offset = buf.writeDoubleLE(spec.periodMs, offset);
    offset = buf.writeDoubleLE(spec.cost, offset);
    offset = buf.writeDoubleLE(spec.shadow ? 1 : 0, offset);
  }
  return offset;
}

/** The packed parameters of `specs`, as consume.lua takes them (tests drive the script with it). */
export function encodeBucketParams(specs: readonly Pick<BucketSpec, 'algorithm' | 'limit' | 'periodMs' | 'cost' | 'shadow'>[]): Buffer {
  const buf = Buffer.allocUnsafe(8 * PARAMS_PER_BUCKET * specs.length);
  writeBucketParams(buf, 0, specs as readonly BucketSpec[], null);
  return buf;
}

/** The key count, KEYS and ARGV of consume.lua for the buckets `idx` (all of them when null). */
function consumeArgs(specs: readonly BucketSpec[], keys: readonly string[], idx: readonly number[] | null, clock: string, mode: '' | 'reserve'): Arg[] {
  const n = idx ? idx.length : specs.length;
  const args: Arg[] = new Array(n + 4);
  args[0] = n;
  for (let k = 0; k < n; k++) args[k + 1] = keys[idx ? idx[k]! : k]!;
  args[n + 1] = clock;
  args[n + 2] = mode;
  const params = Buffer.allocUnsafe(8 * PARAMS_PER_BUCKET * n);
  writeBucketParams(params, 0, specs, idx);
  args[n + 3] = params;
  return args;
}

function parsePlain(r: unknown, n: number): ConsumeOutcome {
  if (!isIntArray(r, 2 + PLAIN_STRIDE * n)) throw badReply('consume', r);
  return { allowed: r[0] === 1, now: r[1]!, buckets: readBuckets(r, 2, n) };
}

/** `n` bucket states from a consume reply, from `offset` on (remaining, resetAt, limited, retryAt each). */
function readBuckets(r: readonly number[], offset: number, n: number): BucketState[] {
  const buckets: BucketState[] = new Array(n);
  for (let k = 0, o = offset; k < n; k++, o += PLAIN_STRIDE) {
    buckets[k] = { remaining: r[o]!, resetAt: r[o + 1]!, limited: r[o + 2] === 1, retryAt: r[o + 3]! };
  }
  return buckets;
}

function isIntArray(r: unknown, length: number): r is number[] {
  return Array.isArray(r) && r.length === length && typeof r[0] === 'number';
}

function badReply(what: string, r: unknown): StoreError {
  return new StoreError('script', `store ${what}: unexpected reply ${JSON.stringify(r)?.slice(0, 200)}`);
}

/**
 * Indices of the keys grouped by hash slot, or null when they all share one (the usual case: one
 * identity's buckets carry the same hash tag), which then needs no grouping at all.
 */
function groupBySlot(keys: readonly string[]): number[][] | null {
  const first = keySlot(keys[0]!);
  let i = 1;
  while (i < keys.length && keySlot(keys[i]!) === first) i++;
  if (i === keys.length) return null;
  const bySlot = new Map<number, number[]>();
  for (let k = 0; k < keys.length; k++) {
    const slot = keySlot(keys[k]!);
    const g = bySlot.get(slot);
    if (g) g.push(k);
    else bySlot.set(slot, [k]);
  }
  return [...bySlot.values()];
}

interface ClusterUrl {
  nodes: { host: string; port: number }[];
  username?: string;
  password?: string;
  tls: boolean;
}

/** `redis-cluster://[user:pass@]h:p,h:p` (or `rediss-cluster://` for TLS) → seed nodes; null for other schemes. */
export function parseClusterUrl(url: string): ClusterUrl | null {
  const m = /^(rediss?)-cluster:\/\/([^/?#]*)/.exec(url);
  if (!m) return null;
  let rest = m[2]!;
  const out: ClusterUrl = { nodes: [], tls: m[1] === 'rediss' };
  const at = rest.lastIndexOf('@');
  if (at !== -1) {
    const creds = rest.slice(0, at);
    rest = rest.slice(at + 1);
    const colon = creds.indexOf(':');
    const user = decodeURIComponent(colon === -1 ? creds : creds.slice(0, colon));
    if (colon !== -1) out.password = decodeURIComponent(creds.slice(colon + 1));
    if (user) out.username = user;
  }
  for (const hp of rest.split(',')) {
    if (!hp) continue;
    const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(hp);
    const [host, port] = v6 ? [v6[1]!, v6[2]] : [hp.split(':')[0]!, hp.split(':')[1]];
    out.nodes.push({ host, port: port ? Number(port) : 6379 });
  }
  if (out.nodes.length === 0) throw new Error(`store url names no cluster node: ${redact(url)}`);
  return out;
}

/** Strips credentials from a URL for messages. */
function redact(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//***@');
}

/** Waits for `p` (ignoring its outcome) but no longer than `ms`. */
function settleWithin(p: Promise<unknown>, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    p.then(
      () => {
        clearTimeout(timer);
        resolve();
      },
      () => {
        clearTimeout(timer);
        resolve();
      },
    );
  });
}

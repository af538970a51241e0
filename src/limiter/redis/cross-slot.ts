/**
 * @module Reserve-and-refund for a request whose buckets span several Redis Cluster slots.
 *
 * Such a request cannot be one atomic script. Each slot is reserved in parallel (charged all-or-nothing
 * within the slot, as usual); if every slot admitted, that is the answer; if any slot rejected, or
 * failed, the slots that charged are refunded.
 *
 * Under-admission this allows, and nothing worse: between a slot's reservation and its refund (one
 * round trip, or up to `timeoutMs` when a slot is slow), other requests on that slot's buckets see the
 * reserved cost as taken and may be rejected although the request holding it is eventually rejected
 * too. A refund gives back at most what the charge still weighs (see refund.lua), so no bucket ever
 * ends up holding less than its admitted requests: window counts get the cost back exactly; a token
 * bucket keeps the reservation's age (about one round trip, in µs of refill) charged. If the refund
 * itself fails, the charge stays until the bucket's window or refill passes it — again fewer
 * admissions, never more — and `onRefundError` is told (metrics and a warning).
 */
import { StoreError } from '../errors.js';
import { badReply, consumeArgs, isIntArray, RESERVE_STRIDE, type Arg } from './codec.js';
import { keySlot } from './slot.js';
import type { BucketSpec, BucketState, ConsumeOutcome } from '../types.js';

type ScriptFn = (...args: Arg[]) => Promise<unknown>;

export interface CrossSlotOptions {
  readonly consumeFn: ScriptFn;
  readonly refundFn: ScriptFn;
  /** The scripts' clock argument ('' for Redis TIME). */
  readonly clock: () => string;
  /** Bounds a call by the store timeout, mapping failures to StoreError. */
  readonly bounded: <T>(p: Promise<T>, what: string) => Promise<T>;
  readonly timeoutMs: number;
  readonly onRefundError?: (err: StoreError) => void;
  /** The master deciding a (prefixed) key: named on a failure, so that only its breaker counts it. */
  readonly nodeOfKey?: (key: string) => string;
}

export class CrossSlot {
  /** Refunds that failed or timed out since start. */
  refundFailures = 0;
  private readonly pendingRefunds = new Set<Promise<void>>();

  constructor(private readonly o: CrossSlotOptions) {}

  /** Charges `specs` (keys already prefixed) whose key indices are grouped by slot in `groups`. */
  async consume(specs: readonly BucketSpec[], keys: readonly string[], groups: number[][]): Promise<ConsumeOutcome> {
    const started = Date.now();
    const clock = this.o.clock();
    const replies: (readonly number[] | undefined)[] = new Array(groups.length);
    let abandoned = false;
    const calls = groups.map((idx, g) =>
      this.o.consumeFn(...consumeArgs(specs, keys, idx, clock, 'reserve')).then((r) => {
        if (!isIntArray(r, 2 + RESERVE_STRIDE * idx.length)) throw badReply('consume', r);
        replies[g] = r;
        // The request already failed (timeout or another slot's error): this late charge is released.
        if (abandoned) void this.refund(specs, keys, idx, r);
        return r;
      }),
    );
    try {
      await this.o.bounded(Promise.all(calls), 'consume');
    } catch (err) {
      abandoned = true;
      const failed = new Set<string>();
      for (let g = 0; g < groups.length; g++) {
        const r = replies[g];
        if (r) void this.refund(specs, keys, groups[g]!, r);
        else if (this.o.nodeOfKey) failed.add(this.o.nodeOfKey(keys[groups[g]![0]!]!));
      }
      if (err instanceof StoreError && failed.size > 0) err.nodes = [...failed];
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
    const left = this.o.timeoutMs - (Date.now() - started);
    if (refunds.length > 0 && left > 0) await settleWithin(Promise.all(refunds), left);
    return { allowed, decider: 'store', now, buckets };
  }

  /** Waits (bounded) for refunds still in flight, so a closing replica does not leave charges behind. */
  async settle(): Promise<void> {
    if (this.pendingRefunds.size > 0) await settleWithin(Promise.all(this.pendingRefunds), this.o.timeoutMs);
  }

  /** Releases what one slot's reserve call charged. Never rejects: a failed refund only under-admits. */
  private refund(
    specs: readonly BucketSpec[],
    keys: readonly string[],
    idx: readonly number[],
    r: readonly number[],
  ): Promise<void> {
    if (r[0] !== 1) return Promise.resolve();
    const refundKeys: string[] = [];
    // The group's `now` is when the reservation was made: token-bucket refunds depend on its age.
    const argv: Arg[] = [this.o.clock(), r[1]!];
    for (let k = 0; k < idx.length; k++) {
      const charged = r[2 + RESERVE_STRIDE * k + 4]!;
      if (charged === -1) continue;
      const spec = specs[idx[k]!]!;
      refundKeys.push(keys[idx[k]!]!);
      argv.push(spec.algorithm, spec.limit, spec.periodMs, spec.cost, charged);
    }
    if (refundKeys.length === 0) return Promise.resolve();
    const p = this.o.bounded(this.o.refundFn(refundKeys.length, ...refundKeys, ...argv), 'refund').then(
      () => undefined,
      (err: StoreError) => {
        this.refundFailures++;
        this.o.onRefundError?.(err);
      },
    );
    this.pendingRefunds.add(p);
    void p.then(() => this.pendingRefunds.delete(p));
    return p;
  }
}

/**
 * Indices of the keys grouped by hash slot, or null when they all share one (the usual case: one
 * identity's buckets carry the same hash tag), which then needs no grouping at all.
 */
export function groupBySlot(keys: readonly string[]): number[][] | null {
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

/** Waits for `p` (ignoring its outcome) but no longer than `ms`. */
export function settleWithin(p: Promise<unknown>, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    const done = (): void => {
      clearTimeout(timer);
      resolve();
    };
    p.then(done, done);
  });
}

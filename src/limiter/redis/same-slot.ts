/** @module A request whose keys share one slot (every request on a single Redis): one consume.lua call, or batched with the other calls of the turn into one consume-batch.lua call (batcher.ts). */
import { SlotBatcher, type BatchCall } from './batcher.js';
import { asksLease, batchArgs, consumeArgs, parseBatch, parsePlain } from './codec.js';
import type { ScriptCall } from './raw-script.js';
import type { BucketSpec, ConsumeOutcome } from '../types.js';

/** A consume call waiting for its batch to be sent. */
interface PendingConsume extends BatchCall {
  readonly specs: readonly BucketSpec[];
  readonly keys: readonly string[];
  readonly resolve: (outcome: ConsumeOutcome) => void;
}

export interface SameSlotOptions {
  /** consume.lua and consume-batch.lua, each called with its whole argument list. */
  readonly consume: ScriptCall;
  readonly consumeBatch: ScriptCall;
  /** The scripts' clock argument ('' for Redis TIME). */
  readonly clock: () => string;
  /** The store's bound on a call (timeout, error mapping, topology hint): `p`'s reply or failure to one of the handlers, once. */
  readonly settle: (
    p: Promise<unknown>,
    what: string,
    budgetMs: number,
    answered: (reply: unknown) => void,
    failed: (err: unknown) => void,
  ) => void;
  readonly timeoutMs: number;
  /** false: every call goes alone, at once. */
  readonly batching: boolean;
  /** Told the number of requests of each script call the batcher sends. */
  readonly onBatch: (requests: number) => void;
}

export class SameSlot {
  private readonly batcher: SlotBatcher<PendingConsume> | null;

  constructor(private readonly o: SameSlotOptions) {
    this.batcher = o.batching
      ? new SlotBatcher<PendingConsume>(this.sendBatch, { timeoutMs: o.timeoutMs, onBatch: o.onBatch })
      : null;
  }

  /** Charges `specs` (their prefixed `keys`, all in `slot`) by one script call, alone or in a batch. */
  consume(slot: number, specs: readonly BucketSpec[], keys: readonly string[]): Promise<ConsumeOutcome> {
    return new Promise<ConsumeOutcome>((resolve, reject) => {
      if (this.batcher === null) this.sendOne({ specs, keys, resolve, reject });
      else this.batcher.enqueue(slot, { specs, keys, resolve, reject });
    });
  }

  /** Sends what is still queued (on close). */
  drain(): void {
    this.batcher?.drain();
  }

  /** One request's plain consume.lua call. */
  private sendOne(
    { specs, keys, resolve, reject }: PendingConsume,
    budgetMs = this.o.timeoutMs,
    done?: () => void,
  ): void {
    const n = specs.length;
    this.o.settle(
      this.o.consume(consumeArgs(specs, keys, null, this.o.clock(), '')),
      'consume',
      budgetMs,
      (reply) => {
        done?.();
        try {
          resolve(parsePlain(reply, n, asksLease(specs)));
        } catch (err) {
          reject(err);
        }
      },
      (err: unknown) => {
        done?.();
        reject(err);
      },
    );
  }

  /** The batcher's sender: a batch of one is a plain consume call; more go as one consume-batch.lua call. */
  private readonly sendBatch = (batch: readonly PendingConsume[], budgetMs: number, done: () => void): void => {
    if (batch.length === 1) {
      this.sendOne(batch[0]!, budgetMs, done);
      return;
    }
    this.o.settle(
      this.o.consumeBatch(batchArgs(batch, this.o.clock())),
      'consume',
      budgetMs,
      (reply) => {
        done();
        let outcomes: ConsumeOutcome[];
        try {
          outcomes = parseBatch(reply, batch);
        } catch (err) {
          for (const call of batch) call.reject(err);
          return;
        }
        for (let i = 0; i < batch.length; i++) batch[i]!.resolve(outcomes[i]!);
      },
      (err: unknown) => {
        done();
        for (const call of batch) call.reject(err);
      },
    );
  };
}

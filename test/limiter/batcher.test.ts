/** The per-slot batcher with a fake sender and a fake clock: no Redis, no sleeps. */
import { describe, expect, it } from 'vitest';
import { MAX_BATCH_REQUESTS, SlotBatcher, type BatchCall } from '../../src/limiter/redis/batcher.js';
import { StoreTimeoutError } from '../../src/limiter/errors.js';
import { FakeClock } from '../support/clock.js';

interface Call extends BatchCall {
  readonly id: number;
  error?: unknown;
}

interface Sent {
  readonly ids: number[];
  readonly budgetMs: number;
  readonly done: () => void;
}

const TIMEOUT = 50;

function setup() {
  const clock = new FakeClock();
  const sent: Sent[] = [];
  const deferred: (() => void)[] = [];
  const sizes: number[] = [];
  const batcher = new SlotBatcher<Call>(
    (calls, budgetMs, done) => sent.push({ ids: calls.map((c) => c.id), budgetMs, done }),
    {
      timeoutMs: TIMEOUT,
      now: clock.now,
      defer: (fn) => deferred.push(fn),
      onBatch: (n) => sizes.push(n),
    },
  );
  let next = 0;
  const call = (): Call => {
    const c: Call = { id: ++next, reject: (err) => (c.error = err) };
    return c;
  };
  /** The end of the event-loop turn: what the batcher deferred runs. */
  const endOfTurn = (): void => {
    for (const fn of deferred.splice(0)) fn();
  };
  return { clock, sent, sizes, batcher, call, endOfTurn };
}

describe('the per-slot batcher', () => {
  it('sends the calls of one turn as one batch at the end of the turn, in arrival order', () => {
    const { batcher, call, sent, endOfTurn, sizes } = setup();
    for (let i = 0; i < 5; i++) batcher.enqueue(0, call());
    expect(sent).toHaveLength(0);
    endOfTurn();
    expect(sent.map((s) => s.ids)).toEqual([[1, 2, 3, 4, 5]]);
    expect(sent[0]!.budgetMs).toBe(TIMEOUT);
    expect(sizes).toEqual([5]);
  });

  it(`puts at most ${MAX_BATCH_REQUESTS} calls in one script call and sends the rest as further batches at once`, () => {
    const { batcher, call, sent, endOfTurn, sizes } = setup();
    const n = 2 * MAX_BATCH_REQUESTS + 3;
    for (let i = 0; i < n; i++) batcher.enqueue(0, call());
    endOfTurn();
    expect(sent.map((s) => s.ids.length)).toEqual([MAX_BATCH_REQUESTS, MAX_BATCH_REQUESTS, 3]);
    expect(sent.flatMap((s) => s.ids)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
    expect(sizes).toEqual([MAX_BATCH_REQUESTS, MAX_BATCH_REQUESTS, 3]);
  });

  it('holds the calls made while its slot has a batch in flight and sends them together once it is answered', () => {
    const { batcher, call, sent, endOfTurn } = setup();
    batcher.enqueue(0, call());
    endOfTurn();
    for (let i = 0; i < 3; i++) {
      batcher.enqueue(0, call());
      endOfTurn(); // turns pass while the first batch is in flight: nothing more is sent
    }
    expect(sent).toHaveLength(1);
    sent[0]!.done();
    endOfTurn();
    expect(sent.map((s) => s.ids)).toEqual([[1], [2, 3, 4]]);
  });

  it('keeps slots apart: a batch in flight on one slot does not hold another slot', () => {
    const { batcher, call, sent, endOfTurn } = setup();
    batcher.enqueue(1, call());
    endOfTurn();
    batcher.enqueue(1, call());
    batcher.enqueue(2, call());
    batcher.enqueue(2, call());
    endOfTurn();
    expect(sent.map((s) => s.ids)).toEqual([[1], [3, 4]]);
    sent[0]!.done();
    endOfTurn();
    expect(sent.map((s) => s.ids)).toEqual([[1], [3, 4], [2]]);
  });

  it('counts the wait behind a batch in flight against the timeout: a waiting call is sent with what is left of it', () => {
    const { batcher, call, sent, endOfTurn, clock } = setup();
    batcher.enqueue(0, call());
    endOfTurn();
    clock.advance(10);
    batcher.enqueue(0, call()); // its wait starts now
    clock.advance(20);
    batcher.enqueue(0, call()); // joins the lane: the oldest waiter's start counts for the batch
    clock.advance(5);
    sent[0]!.done();
    endOfTurn();
    expect(sent[1]!.ids).toEqual([2, 3]);
    expect(sent[1]!.budgetMs).toBe(TIMEOUT - 25);
  });

  it('fails calls whose time ran out while they waited, unsent, with a StoreTimeoutError', () => {
    const { batcher, call, sent, endOfTurn, clock } = setup();
    batcher.enqueue(0, call());
    endOfTurn();
    const late = [call(), call()];
    for (const c of late) batcher.enqueue(0, c);
    clock.advance(TIMEOUT);
    sent[0]!.done();
    endOfTurn();
    expect(sent).toHaveLength(1);
    for (const c of late) expect(c.error).toBeInstanceOf(StoreTimeoutError);
    // The lane is free again: the next call goes out with a full budget.
    batcher.enqueue(0, call());
    endOfTurn();
    expect(sent[1]).toMatchObject({ ids: [4], budgetMs: TIMEOUT });
  });

  it('sends what still waits when drained (closing), even with a batch in flight', () => {
    const { batcher, call, sent, endOfTurn } = setup();
    batcher.enqueue(0, call());
    endOfTurn();
    batcher.enqueue(0, call());
    batcher.drain();
    expect(sent.map((s) => s.ids)).toEqual([[1], [2]]);
  });
});

/**
 * @module The lease store's options and interface (lease.ts implements it).
 */
import type { Clock } from '../clock.js';
import type { BucketSpec, ConsumeOutcome, Store } from '../types.js';

export interface LeaseOptions {
  /** Gateway replicas sharing the store (`store.gateways`): a lease is at most remaining ÷ (2 × gateways). */
  readonly gateways?: number;
  /** Returns unspent tokens to the store; best effort (a failure strands them, never over-admits). */
  readonly giveBack: (spec: BucketSpec, tokens: number, chargedAt: number) => Promise<unknown>;
  /** The local clock and timers (tests: a fake clock). */
  readonly clock?: Clock;
  /** A lease aims at this many ms of this gateway's traffic on the key (default 500). */
  readonly targetMs?: number;
  /** A lease is spent at most this long after its first tokens were counted (default 1000). */
  readonly maxAgeMs?: number;
  /** Unspent tokens of a key without traffic for this long are given back (default 1000). */
  readonly idleMs?: number;
  /** Keys tracked at most; beyond, new keys are decided by the store alone (default 100 000). */
  readonly maxEntries?: number;
}

export interface LeaseStore extends Store {
  /** Admitted from the leases held when every bucket has one with room for its cost; else undefined, nothing spent. */
  consumeLocal(specs: readonly BucketSpec[]): ConsumeOutcome | undefined;
  /** Requests admitted from leases without a store call, since start. */
  readonly localAdmissions: number;
  /**
   * Every token charged for a lease is spent or given back within this long of its charge (its age
   * limit, plus the sweep's period): a gateway refused meanwhile may find them back in the store then.
   */
  readonly returnedWithinMs: number;
  /** Tokens held now, for one bucket key or over all keys (tests, metrics). */
  heldTokens(key?: string): number;
  /** Gives back what expired or idled now (the timer calls it; tests call it after moving the clock). */
  sweep(): void;
  /** Resolves when the give-backs sent so far have been answered (or failed). */
  settled(): Promise<void>;
  /** The gateways sharing the store now (the fleet's live count): later leases are sized by it. */
  setGateways(n: number): void;
}

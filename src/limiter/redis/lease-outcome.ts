/**
 * @module What a store call for a request with leases comes back to (lease.ts): the extra tokens taken
 * in, the buckets reported with what this gateway holds, and the tokens reserved from leases put back
 * when the request was refused.
 */
import type { LeaseEntry } from './lease-entry.js';
import type { BucketSpec, BucketState, ConsumeOutcome } from '../types.js';

/** Does a bucket the store refused now hold a lease for the request's cost? */
export function leaseArrived(
  specs: readonly BucketSpec[],
  entries: readonly (LeaseEntry | undefined)[],
  index: readonly number[],
  out: ConsumeOutcome,
): boolean {
  for (let k = 0; k < index.length; k++) {
    const i = index[k]!;
    const e = entries[i];
    if (out.buckets[k]!.limited && e !== undefined && e.tokens >= specs[i]!.cost) return true;
  }
  return false;
}

/** The request was not admitted: reserved tokens go back to their stock, if it is still the current one. */
export function unreserve(
  specs: readonly BucketSpec[],
  entries: readonly (LeaseEntry | undefined)[],
  reserved: readonly number[],
): void {
  for (let i = 0; i < specs.length; i++) {
    const e = entries[i];
    if (e !== undefined && reserved[i]! >= 0 && e.stock === reserved[i]) e.tokens += specs[i]!.cost;
  }
}

/** Takes in what the store granted, and reports every bucket (this gateway's holding counts as remaining). */
export function takeIn(
  at: number,
  maxAgeMs: number,
  specs: readonly BucketSpec[],
  entries: readonly (LeaseEntry | undefined)[],
  reserved: readonly number[],
  index: readonly number[],
  out: ConsumeOutcome,
  sentAt: number,
): ConsumeOutcome {
  const n = specs.length;
  const buckets: BucketState[] = new Array(n);
  for (let k = 0; k < index.length; k++) {
    const i = index[k]!;
    const e = entries[i];
    const b = out.buckets[k]!;
    if (e !== undefined) {
      e.called(at);
      if (out.allowed) e.granted(b.leased ?? 0, b, out.now, sentAt, maxAgeMs);
    }
    // The store's figure already counts what this gateway holds as spent.
    buckets[i] =
      e === undefined || e.tokens === 0
        ? b
        : { remaining: b.remaining + e.tokens, resetAt: b.resetAt, limited: b.limited, retryAt: b.retryAt };
  }
  for (let i = 0; i < n; i++) {
    if (reserved[i]! < 0) continue;
    const e = entries[i]!;
    if (out.allowed) {
      e.hits++;
      e.lastUsed = at;
    }
    buckets[i] = { remaining: e.storeRemaining + e.tokens, resetAt: e.resetAt, limited: false, retryAt: out.now };
  }
  // The store (or the fallback) decided the buckets it was asked; a request served wholly from leases is the lease's.
  return { allowed: out.allowed, decider: out.decider ?? 'store', now: out.now, buckets };
}

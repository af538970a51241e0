/**
 * @module A decision's give-back as refund.lua calls (the Store contract's refund on Redis): one call per
 * charged bucket, each in its own key's slot, so a request across Cluster slots is refunded in each.
 */
import { toStoreError, type StoreError } from '../errors.js';
import type { BucketSpec, ConsumeOutcome } from '../types.js';

/** How much earlier than the decision's `now` a token bucket charged across Cluster slots counts as charged. */
export const REFUND_SKEW_MS = 1_000;

/**
 * Gives back each charged bucket's cost at the decision's `now`; a token bucket of a request that spanned
 * slots (`spread`: each master charged it by its own clock; `now` is the latest) counts it REFUND_SKEW_MS
 * earlier, so no refund gives back refill that already came. Never rejects: a failure is told `onError`.
 */
export function refundCharges(
  specs: readonly BucketSpec[],
  outcome: ConsumeOutcome,
  spread: boolean,
  giveBack: (spec: BucketSpec, tokens: number, chargedAt: number) => Promise<unknown>,
  onError: ((err: StoreError) => void) | undefined,
): Promise<void> {
  const calls: Promise<unknown>[] = [];
  for (let i = 0; i < specs.length; i++) {
    const spec = specs[i]!;
    if (outcome.buckets[i]!.limited) continue; // a full shadow bucket: not charged
    const at = spread && spec.algorithm === 'token-bucket' ? outcome.now - REFUND_SKEW_MS : outcome.now;
    calls.push(giveBack(spec, spec.cost, at).catch((err: unknown) => onError?.(toStoreError(err, 'refund'))));
  }
  return Promise.all(calls).then(() => undefined);
}

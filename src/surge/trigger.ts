/**
 * @module A surge's trigger as the count reads it: the statuses it counts by code, its instance-wide
 * bucket in the counter store, its guard entry id, and why it started, as the log and the admin API say it.
 */
import type { SurgeConfig } from '../config/schema.js';
import { formatDuration } from '../config/fields/duration.js';
import { bucketKey } from '../limiter/keys.js';
import type { BucketSpec } from '../limiter/types.js';
import type { NetworkShares } from './network-shares.js';

/** A surge's trigger as the count reads it, built when the table is loaded or reloaded. */
export interface Trigger {
  readonly surge: SurgeConfig;
  /** By status code: 1 for an upstream answer the trigger counts (`statuses`). */
  readonly counted: Uint8Array;
  /** This replica's record of each network's share. */
  readonly shares: NetworkShares;
}

/** `statuses` (codes and classes such as `2xx`) as a lookup by code. */
export function countedStatuses(statuses: readonly (number | string)[]): Uint8Array {
  const counted = new Uint8Array(600);
  for (const s of statuses) {
    if (typeof s === 'number') counted[s] = 1;
    else counted.fill(1, Number(s[0]) * 100, Number(s[0]) * 100 + 100);
  }
  return counted;
}

/** Why a surge started by itself: its trigger, as the log line and the admin API say it. */
export function triggerReason(s: SurgeConfig): string {
  return `${s.trigger.rule}: more than ${s.trigger.above} answered ${s.trigger.statuses.join('/')} within ${formatDuration(s.trigger.within)}`;
}

/** The guard entry id of a surge: never an address, so no release reads it as a block or exemption. */
export function surgeId(name: string): string {
  return `surge:${name}`;
}

/** The trigger's bucket: one for the whole instance; `/` is not a rule-name character, so no rule's key collides. */
export function triggerSpec(s: SurgeConfig): BucketSpec {
  return {
    key: bucketKey(`surge/${s.name}:`, 'global'),
    limit: s.trigger.above,
    periodMs: s.trigger.within,
    algorithm: 'sliding-window',
    cost: 1,
    shadow: false,
    onError: 'local',
  };
}

/** Whether two versions of a surge group clients into the same networks. */
export function samePrefix(a: SurgeConfig, b: SurgeConfig): boolean {
  return (
    a.trigger.networkPrefix.ipv4 === b.trigger.networkPrefix.ipv4 &&
    a.trigger.networkPrefix.ipv6 === b.trigger.networkPrefix.ipv6
  );
}

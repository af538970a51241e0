/**
 * @module The memory store's bound on buckets (`store.maxKeys`): the default, the share of the table kept
 * from keys the client chooses, and the answer a request gets when its bucket finds no room.
 */
import type { Evaluation } from '../algorithms.js';

/**
 * The bound of a store built without one (tests, `explain`). `serve` always passes one: store.maxKeys,
 * or the default derived from the memory limit (key-bound.ts). A packed bucket costs ~90 B, an IPv6
 * network or a long account key ~300-400 B through the gateway: 1,000,000 buckets are 90-400 MB.
 */
export const DEFAULT_MAX_KEYS = 1_000_000;
/** The share of the table keys chosen by the client may fill. */
export const CLIENT_CHOSEN_SHARE = 0.9;
/** A request refused for want of room is told to come back after this. */
const FULL_RETRY_MS = 1_000;

/** IPv4 (`{ip:a.b.c.d}`, no colon), account and global keys: not multiplied by values the client picks. */
export function reservedKind(key: string): boolean {
  const brace = key.indexOf('{');
  if (brace < 0) return false;
  if (key.startsWith('{acct:', brace) || key.startsWith('{global}', brace)) return true;
  return key.startsWith('{ip:', brace) && key.indexOf(':', brace + 4) < 0;
}

/** The answer for a bucket the table has no room for: limited, retry in FULL_RETRY_MS. */
export function fullEvaluation(now: number, out: Evaluation): Evaluation {
  const at = now + FULL_RETRY_MS;
  return out.set(false, 0, 0, 0, now, 0, 0, at, at, at);
}

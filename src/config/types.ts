/** @module The compiled, immutable form of a limit table that the request path reads. */
import type { Config, LimitRule } from './schema.js';

export type { Config };

// Derived from the zod schema, so a new algorithm, policy or key kind is spelled in one place.
export type Algorithm = LimitRule['algorithm'];
export type OnError = Config['store']['onError'];
export type Per = LimitRule['per'];

/** One rule of `limits:`, prepared at load so the request path only reads fields. */
export interface CompiledRule {
  /** Position in the table: ties between buckets go to the lower index. */
  readonly index: number;
  readonly name: string;
  readonly per: Per;
  readonly limit: number;
  readonly periodMs: number;
  readonly algorithm: Algorithm;
  readonly cost: number;
  readonly shadow: boolean;
  /** Per-rule override of `store.onError`; undefined means the store's policy. */
  readonly onStoreError: OnError | undefined;
  /** The rule's IETF `RateLimit-Policy` item, e.g. `"sign-up";q=5;w=1800`. */
  readonly policyItem: string;
  /** The `match` patterns as written, for `rategate check` and logs. */
  readonly patterns: readonly string[];
}

/** (method, normalized path) → the rules that match, in table order. */
export interface Matcher {
  /** Returns the same frozen array for the same set of rules; never allocates per call on a hit. */
  match(method: string, path: string): readonly CompiledRule[];
}

/** A validated config, compiled once; a reload builds a new one and swaps it whole. */
export interface Snapshot {
  readonly config: Config;
  readonly rules: readonly CompiledRule[];
  readonly matcher: Matcher;
  /** Where the config came from (a file path), for logs. */
  readonly source: string;
}

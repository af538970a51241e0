/** @module The compiled, immutable form of a limit table that the request path reads. */
import type { RuleKey } from '../keys/index.js';
import type { Config, LimitRule } from './schema.js';
import type { AccountCondition } from '../identity/account-facts.js';

export type { Config };

// Derived from the zod schema, so a new algorithm, policy or key kind is spelled in one place.
export type Algorithm = LimitRule['algorithm'];
export type OnError = Config['store']['onError'];

/** One rule of `limits:`, prepared at load so the request path only reads fields. */
export interface CompiledRule {
  /** Position in the table: ties between buckets go to the lower index. */
  readonly index: number;
  readonly name: string;
  /** The surge (`surges:`) this rule belongs to: it counts only while that surge is on; null for `limits:`. */
  readonly surge: string | null;
  /** `per:`, compiled against the key-kind table (keys/kinds.ts): what the rule counts per. */
  readonly key: RuleKey;
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
  /** `when.authenticated`, undefined when the rule does not care. */
  readonly whenAuthenticated: boolean | undefined;
  /** `when.account` (the account's age, bot, locked), null when the rule does not care. */
  readonly whenAccount: AccountCondition | null;
  /** `when.query`, null when the rule does not care. */
  readonly whenQuery: readonly string[] | null;
  /** `when.query`'s bracket paths, same order, compiled at load (a name Rack reads literally: itself). */
  readonly whenQueryPaths: readonly (readonly string[])[] | null;
  /**
   * What deciding this rule's bucket needs from a request (keys/needs.ts flags): its key's, `when`'s
   * (the account, the query and a form body) and its overrides' (the account). The request path reads
   * the union over every rule that may apply.
   */
  readonly needs: number;
  /** `overrides`, in order; each carries the rule as it applies to those clients. */
  readonly overrides: readonly RuleOverride[];
  /** -1 for the rule itself; for an override's variant, its position in `overrides` (its bucket is its own). */
  readonly overrideIndex: number;
}

/** One entry of a rule's `overrides`. */
export interface RuleOverride {
  readonly ips: readonly string[];
  readonly accounts: readonly string[];
  /** As written: a header or parameter value, a domain, a token digest; a composite key's: one value per part. */
  readonly keys: readonly (string | readonly string[])[];
  /** The rule with this override's limit (and policy item); same name, index and everything else. */
  readonly rule: CompiledRule;
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

/**
 * @module Why each rule did or did not count a request, noted by the decision itself when asked (explain,
 * replay): counted (under which key, which override), or skipped (`when`, no key); a rule the trace
 * does not name did not match the route, and `unmatchedReason` says whether the method or the path
 * kept it out. The serving path passes no trace and pays one null check per rule.
 */
import type { CompiledRule } from '../config/types.js';
import { compileMatcher } from '../routing/index.js';

/** How one rule went for a request. */
export type RuleNote =
  /** Counted in the bucket `bucket` (its key's tag `tag`); `rule` is the rule as it applied (an override's variant). */
  | {
      readonly counted: true;
      readonly rule: CompiledRule;
      readonly tag: string;
      readonly bucket: string;
      readonly override: number;
    }
  /** Matched the route but did not count it: `why` says (`when.authenticated: …`, `no key: …`). */
  | { readonly counted: false; readonly why: string };

/** A ban or in-flight rule the request matched, and the key it counts under (null: skipped, `why`). */
export interface GuardNote {
  readonly rule: CompiledRule;
  readonly tag: string | null;
  readonly why: string | null;
}

export class Trace {
  /** Limit rules by index; a rule missing here did not match the route. */
  readonly limits = new Map<number, RuleNote>();
  readonly bans: GuardNote[] = [];
  readonly slots: GuardNote[] = [];

  counted(rule: CompiledRule, effective: CompiledRule, tag: string, bucket: string): void {
    this.limits.set(rule.index, { counted: true, rule: effective, tag, bucket, override: effective.overrideIndex });
  }

  skipped(rule: CompiledRule, why: string): void {
    this.limits.set(rule.index, { counted: false, why });
  }
}

/** Why a rule that did not match (method, path) kept out of it: the method, or the path. */
export function unmatchedReason(rule: CompiledRule, method: string, path: string): string {
  const anyMethod = { patterns: rule.patterns.map((p) => p.trim().replace(/^\S+\s+/, '')) };
  return compileMatcher([anyMethod]).match(method, path).length > 0
    ? `method: ${method} is not ${rule.patterns.map((p) => p.trim().split(/\s+/)[0]).join(' / ')}`
    : `path: not ${rule.patterns.join(', ')}`;
}

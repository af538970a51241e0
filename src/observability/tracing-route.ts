/**
 * @module A traced request's `http.route`: of the patterns of the rules that matched it, the most
 * specific, each rule's patterns compiled once.
 */
import { compileMatcher, type RuleMatcher } from '../routing/index.js';
import type { TracedRule } from './tracing-types.js';

/** Each pattern of a rule with its own matcher and its path as `http.route` shows it (the method left off). */
interface RoutePattern {
  readonly route: string;
  readonly matcher: RuleMatcher<{ readonly patterns: readonly string[] }> | null;
}

/** Built once per rule (a reload makes new rules; the old ones go with their snapshot). */
const patternsOf = new WeakMap<TracedRule, readonly RoutePattern[]>();

/**
 * `http.route`: of the patterns that matched the request, the most specific (the longest); null when no
 * rule matched. A rule with one pattern matched by it; one with several is asked which.
 */
export function routeOf(sections: readonly (readonly TracedRule[])[], method: string, path: string): string | null {
  let best: string | null = null;
  for (const rules of sections) {
    for (const rule of rules) {
      let patterns = patternsOf.get(rule);
      if (patterns === undefined) {
        const many = rule.patterns.length > 1;
        patterns = rule.patterns.map((p) => ({
          route: p.trim().replace(/^\S+\s+/, ''),
          matcher: many ? compileMatcher([{ patterns: [p] }]) : null,
        }));
        patternsOf.set(rule, patterns);
      }
      for (const p of patterns) {
        if (p.matcher !== null && p.matcher.match(method, path).length === 0) continue;
        if (best === null || p.route.length > best.length) best = p.route;
      }
    }
  }
  return best;
}

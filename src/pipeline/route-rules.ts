/**
 * @module The rules of a route, compiled once per snapshot: (method, path) → the limit rules, bans and
 * in-flight limits that match, and the union of what they need (keys/needs.ts), in one trie walk; and,
 * for a POST whose override could name any method, the union over every method (what may apply). The
 * stage that decides what to read takes that union, so no stage decides on less than another reads.
 */
import type { CompiledRule } from '../config/types.js';
import { NEED } from '../keys/index.js';
import { compileMatcher, parsePattern, type RuleMatcher } from '../routing/index.js';

export interface RouteRules {
  /** Limit rules, in table order. */
  readonly limits: readonly CompiledRule[];
  /** Ban rules (their `index` is their position in `bans:`). */
  readonly bans: readonly CompiledRule[];
  /** In-flight rules (their `index` is their position in `concurrency:`). */
  readonly slots: readonly CompiledRule[];
  /** The union of their needs. */
  readonly needs: number;
}

const NONE: readonly CompiledRule[] = [];
export const NO_ROUTE_RULES: RouteRules = Object.freeze({ limits: NONE, bans: NONE, slots: NONE, needs: 0 });

type Section = 'limits' | 'bans' | 'slots';

interface Entry {
  readonly patterns: readonly string[];
  readonly section: Section | null;
  readonly rule: CompiledRule | null;
  readonly needs: number;
}

export interface RouteRuleSources {
  readonly limits: readonly CompiledRule[];
  readonly bans: readonly CompiledRule[];
  readonly slots: readonly CompiledRule[];
  /** `routes:` patterns: a method-bound route makes the method matter (routing follows the counted method). */
  readonly routes: readonly (readonly string[])[];
}

export class RouteRuleIndex {
  private readonly exact: RuleMatcher<Entry>;
  private readonly anyMethod: RuleMatcher<Entry>;
  /** Per matched set (the matcher returns one frozen array per set): built once, then looked up. */
  private readonly byMatch = new Map<readonly Entry[], RouteRules>();
  private readonly needsByMatch = new Map<readonly Entry[], number>();
  /** The last (method, path) `of` answered, and its answer. */
  private lastPath: string | null = null;
  private lastMethod = '';
  private lastRules: RouteRules = NO_ROUTE_RULES;

  constructor(src: RouteRuleSources) {
    const entries: Entry[] = [];
    for (const section of ['limits', 'bans', 'slots'] as const) {
      for (const rule of src[section]) entries.push({ patterns: rule.patterns, section, rule, needs: rule.needs });
    }
    this.exact = compileMatcher(entries);
    this.anyMethod = compileMatcher([
      ...entries.flatMap(anyMethodEntries),
      ...src.routes.flatMap((patterns) => anyMethodEntries({ patterns, needs: 0 })),
    ]);
  }

  /** The rules of (method, path); the same object for the same set of rules. */
  of(method: string, path: string): RouteRules {
    // A flood repeats one request: its route is most often the one asked for last (~2k instructions
    // of trie walk saved for a string comparison). A path is bounded by the request line's limit.
    if (path === this.lastPath && method === this.lastMethod) return this.lastRules;
    const hit = this.exact.match(method, path);
    let rules = hit.length === 0 ? NO_ROUTE_RULES : this.byMatch.get(hit);
    if (rules === undefined) this.byMatch.set(hit, (rules = routeRulesOf(hit)));
    this.lastPath = path;
    this.lastMethod = method;
    this.lastRules = rules;
    return rules;
  }

  /**
   * What every rule of `path` needs whatever the method, plus NEED.method when a rule or a route there
   * is bound to a method: a POST's override could then change what applies or where it goes.
   */
  anyMethodNeeds(path: string): number {
    const hit = this.anyMethod.match('GET', path);
    let needs = this.needsByMatch.get(hit);
    if (needs === undefined) {
      needs = 0;
      for (const e of hit) needs |= e.needs;
      this.needsByMatch.set(hit, needs);
    }
    return needs;
  }
}

/** One entry per pattern, its method dropped (it matches any method) and remembered as NEED.method. */
function anyMethodEntries(e: { readonly patterns: readonly string[]; readonly needs: number }): Entry[] {
  const out: Entry[] = [];
  for (const source of e.patterns) {
    const parsed = parsePattern(source);
    if (!parsed.ok) continue; // the config loader has refused it
    const bound = parsed.pattern.method !== null;
    const needs = e.needs | (bound ? NEED.method : 0);
    if (needs === 0) continue;
    out.push({ patterns: [bound ? source.trim().replace(/^\S+\s+/, '') : source], section: null, rule: null, needs });
  }
  return out;
}

function routeRulesOf(hit: readonly Entry[]): RouteRules {
  const limits: CompiledRule[] = [];
  const bans: CompiledRule[] = [];
  const slots: CompiledRule[] = [];
  let needs = 0;
  for (const e of hit) {
    needs |= e.needs;
    if (e.section === 'limits') limits.push(e.rule!);
    else if (e.section === 'bans') bans.push(e.rule!);
    else if (e.section === 'slots') slots.push(e.rule!);
  }
  // The lists are read-only by type, not frozen: every request loops over them, and V8 (node 20 and
  // 22) loads a frozen array's elements through the generic keyed-load stub (screen.ts STAGES).
  return Object.freeze({ limits, bans, slots, needs });
}

/** @module A segment trie over every rule's patterns, built once per snapshot: (method, path) → rules. */
import { parsePattern } from './pattern.js';
import { lastIndexOfCode } from './last-index.js';

/** Anything with patterns can be matched; `CompiledRule` is the production case. */
export interface MatchableRule {
  readonly patterns: readonly string[];
}

export interface RuleMatcher<R> {
  /**
   * The rules whose patterns match, in the order given to `compileMatcher`, each once. The result is
   * frozen and is the same array instance every time the same set of rules matches.
   */
  match(method: string, path: string): readonly R[];
}

interface Entry {
  readonly rule: number;
  /** null: any method. */
  readonly method: string | null;
}

interface Node {
  readonly literals: Map<string, Node>;
  /**
   * The literals again as a list when there are few: a segment is then found by comparing it in place,
   * without slicing a fresh string for the Map to hash (most nodes of a table have one to a few children).
   */
  few: (readonly [string, Node])[] | null;
  param: Node | null;
  /** Patterns that end exactly here. */
  readonly end: Entry[];
  /** Patterns ending in `*` here: they match whatever remains, including nothing. */
  readonly rest: Entry[];
  /** Patterns ending here with Rails' `(.:format)`: they match here, or with `.ext` on this segment. */
  readonly formatEnd: Entry[];
  /** Some literal child has formatEnd entries: a last segment `name.ext` is then also tried as `name`. */
  formatChildren: boolean;
}

function newNode(): Node {
  return { literals: new Map(), few: null, param: null, end: [], rest: [], formatEnd: [], formatChildren: false };
}

const EMPTY: readonly never[] = Object.freeze([]);

/** Throws on an invalid pattern: the config loader has reported those before compiling. */
export function compileMatcher<R extends MatchableRule>(rules: readonly R[]): RuleMatcher<R> {
  const root = buildTrie(rules);

  const n = rules.length;
  // Scratch state reused by every call: matching is synchronous, so calls cannot interleave.
  const seen = new Uint8Array(n);
  const touched = new Int32Array(n);
  let count = 0;
  let reqMethod = '';
  // Result arrays keyed by the set of matched rule indices. The sets that can occur are fixed by the
  // trie, so this stays as small as the table's distinct overlaps.
  const cache = new Map<number | string, readonly R[]>();
  // Up to 52 rules a set fits exactly in a double as a bit mask; beyond, a string key is built.
  const maskKeys = n <= 52;
  const pow2 = Array.from({ length: maskKeys ? n : 0 }, (_, i) => 2 ** i);

  function collect(entries: readonly Entry[]): void {
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!;
      if (seen[e.rule] === 1) continue;
      if (methodMatches(e.method, reqMethod)) {
        seen[e.rule] = 1;
        touched[count++] = e.rule;
      }
    }
  }

  /** `pos` is where the next segment starts; at or past the end, the path is used up. */
  function visit(node: Node, path: string, pos: number): void {
    if (node.rest.length > 0) collect(node.rest);
    if (pos >= path.length) {
      if (node.end.length > 0) collect(node.end);
      if (node.formatEnd.length > 0) collect(node.formatEnd);
      return;
    }
    let end = path.indexOf('/', pos);
    if (end < 0) end = path.length;
    if (node.literals.size > 0) {
      const next = node.few !== null ? literalAt(node.few, path, pos, end) : node.literals.get(path.slice(pos, end));
      if (next !== undefined) visit(next, path, end + 1);
      // `password(.:format)` and a last segment `password.json`: the format is what follows the last
      // dot (Rails' :format takes no dot), the stem must be non-empty and the format too.
      if (node.formatChildren && end === path.length) {
        const dot = lastIndexOfCode(path, 0x2e /* . */, end - 2);
        if (dot > pos) {
          const stem = node.literals.get(path.slice(pos, dot));
          if (stem !== undefined && stem.formatEnd.length > 0) collect(stem.formatEnd);
        }
      }
    }
    // `:name` takes exactly one non-empty segment.
    if (node.param !== null && end > pos) visit(node.param, path, end + 1);
  }

  function match(method: string, path: string): readonly R[] {
    count = 0;
    reqMethod = method;
    // Paths start with `/`; the first segment begins after it.
    visit(root, path, 1);
    if (count === 0) return EMPTY;
    const key = maskKeys ? maskKey(pow2, touched, count) : listKey(touched, count);
    let result = cache.get(key);
    if (result === undefined) {
      const list: R[] = [];
      for (let i = 0; i < n; i++) if (seen[i] === 1) list.push(rules[i] as R);
      result = Object.freeze(list);
      cache.set(key, result);
    }
    for (let i = 0; i < count; i++) seen[touched[i] ?? 0] = 0;
    return result;
  }

  return Object.freeze({ match });
}

/** The rules' patterns as a trie of path segments; each end holds the rule index and its method. */
function buildTrie(rules: readonly MatchableRule[]): Node {
  const root = newNode();
  rules.forEach((rule, index) => {
    for (const source of rule.patterns) insertPattern(root, source, index);
  });
  listFew(root);
  return root;
}

/** Nodes with at most this many literal children compare a segment in place (matcher `few`). */
const FEW_LITERALS = 4;

function listFew(node: Node): void {
  if (node.literals.size > 0 && node.literals.size <= FEW_LITERALS) node.few = [...node.literals];
  for (const child of node.literals.values()) listFew(child);
  if (node.param !== null) listFew(node.param);
}

/** The child whose literal is `path[pos, end)`, compared in place. */
function literalAt(
  few: readonly (readonly [string, Node])[],
  path: string,
  pos: number,
  end: number,
): Node | undefined {
  for (const [literal, child] of few) if (literal.length === end - pos && path.startsWith(literal, pos)) return child;
  return undefined;
}

function insertPattern(root: Node, source: string, index: number): void {
  const parsed = parsePattern(source);
  if (!parsed.ok) throw new Error(`invalid pattern "${source}": ${parsed.error}`);
  let node = root;
  let parent = root;
  let rest = false;
  for (const seg of parsed.pattern.segments) {
    if (seg.kind === 'rest') {
      rest = true;
      break;
    }
    parent = node;
    if (seg.kind === 'param') {
      node.param ??= newNode();
      node = node.param;
    } else {
      let next = node.literals.get(seg.value);
      if (next === undefined) node.literals.set(seg.value, (next = newNode()));
      node = next;
    }
  }
  const entry = { rule: index, method: parsed.pattern.method };
  if (rest) node.rest.push(entry);
  else if (parsed.pattern.format) {
    node.formatEnd.push(entry);
    parent.formatChildren = true;
  } else node.end.push(entry);
}

/** The matched set as a bit mask (up to 52 rules): a sum of distinct powers of two is exact in a double. */
function maskKey(pow2: readonly number[], touched: Int32Array, count: number): number {
  let key = 0;
  for (let i = 0; i < count; i++) key += pow2[touched[i] ?? 0] ?? 0;
  return key;
}

/** The matched set as its sorted indices, for tables too large for a mask. */
function listKey(touched: Int32Array, count: number): string {
  return Array.from(touched.subarray(0, count))
    .sort((a, b) => a - b)
    .join(',');
}

function methodMatches(ruleMethod: string | null, reqMethod: string): boolean {
  // HEAD is served by GET routes (Rails, Express, Node frameworks generally), so without this
  // a client could probe a GET-limited route with HEAD and never be counted.
  return ruleMethod === null || ruleMethod === reqMethod || (ruleMethod === 'GET' && reqMethod === 'HEAD');
}

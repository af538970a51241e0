/**
 * @module The triage sketch as one replica publishes it to the store, and the fleet's view merged from
 * all of them. Bounded: at most SKETCH_TOP keys per rule and MAX_SKETCH_BYTES in all (rules cut
 * beyond, and the sketch then says it is partial), so a replica under attack cannot fill Redis.
 */
import type { TopKey, TopLimited } from '../guard/top-keys.js';

/** Keys per rule a replica publishes: enough for `?top=` up to this across the fleet. */
export const SKETCH_TOP = 50;
export const MAX_SKETCH_BYTES = 64 * 1024;

interface Sketch {
  /** Rule → its top keys as [key, count, error]. */
  readonly rules: Record<string, [string, number, number][]>;
  /** Some rules were left out to stay within MAX_SKETCH_BYTES. */
  readonly partial?: true;
}

/** This replica's sketch as JSON, or undefined when nothing was limited recently (nothing is published). */
export function encodeSketch(top: TopLimited): string | undefined {
  const names = top.rules();
  if (names.length === 0) return undefined;
  const rules: Sketch['rules'] = {};
  let size = 32;
  let partial = false;
  for (const rule of names) {
    const rows = top.top(rule, SKETCH_TOP).map((k): [string, number, number] => [k.key, k.count, k.error]);
    const cost = JSON.stringify(rule).length + JSON.stringify(rows).length + 2;
    if (size + cost > MAX_SKETCH_BYTES) {
      partial = true;
      continue;
    }
    size += cost;
    rules[rule] = rows;
  }
  return JSON.stringify(partial ? { rules, partial: true } : { rules });
}

/** The fleet's top `n` keys of `rule`: counts (and their error bounds) summed over the replicas' sketches. */
export function mergeSketches(jsons: readonly string[], rule: string, n: number): { top: TopKey[]; partial: boolean } {
  const merged = new Map<string, { count: number; error: number }>();
  let partial = false;
  for (const json of jsons) {
    let s: Sketch;
    try {
      s = JSON.parse(json) as Sketch;
    } catch {
      continue; // not ours to read (another release's format): skipped
    }
    if (s.partial === true) partial = true;
    for (const [key, count, error] of s.rules?.[rule] ?? []) {
      const m = merged.get(key);
      if (m === undefined) merged.set(key, { count, error });
      else {
        m.count += count;
        m.error += error;
      }
    }
  }
  const top = [...merged]
    .map(([key, v]) => ({ key, count: v.count, error: v.error }))
    .sort((a, b) => b.count - a.count)
    .slice(0, n);
  return { top, partial };
}

/** The rules some replica limited recently. */
export function sketchRules(jsons: readonly string[]): string[] {
  const names = new Set<string>();
  for (const json of jsons) {
    try {
      for (const rule of Object.keys((JSON.parse(json) as Sketch).rules ?? {})) names.add(rule);
    } catch {
      // skipped, as above
    }
  }
  return [...names];
}

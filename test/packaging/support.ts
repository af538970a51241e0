/**
 * @module Static helpers for the packaging tests (no docker here): file access, the `.Values` paths a
 * template mentions, and a Dockerfile instruction parser. The chart itself is rendered by render.ts.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const CHART = `${ROOT}helm/rategate/`;

export function read(relative: string): string {
  return readFileSync(`${ROOT}${relative}`, 'utf8');
}

// ---------------------------------------------------------------------------------------------------
// Template references (a static check: a misspelt .Values path renders as empty under missingkey=zero).

/** Every `.Values.a.b` (or `$.Values.a.b`) path a template text mentions, deduplicated. */
export function valuesPaths(text: string): string[] {
  const paths = new Set<string>();
  for (const m of text.matchAll(/\$?\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)/g)) paths.add((m[1] ?? '').slice(1));
  return [...paths];
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** True when every segment of `path` is a key of `values` (a key whose value is null counts). */
export function hasPath(values: unknown, path: string): boolean {
  let node: unknown = values;
  for (const key of path.split('.')) {
    if (!isObject(node) || !Object.prototype.hasOwnProperty.call(node, key)) return false;
    node = node[key];
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------
// Dockerfile.

export interface Instruction {
  readonly keyword: string;
  readonly args: string;
  /** 0-based index of the build stage (the FROM it follows). */
  readonly stage: number;
}

/** Splits a Dockerfile into instructions, joining `\` continuations and dropping comments. */
export function parseDockerfile(text: string): Instruction[] {
  const out: Instruction[] = [];
  let stage = -1;
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (pending === '' && (line === '' || line.startsWith('#'))) continue;
    if (pending !== '' && line.startsWith('#')) continue;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1)} `;
      continue;
    }
    const full = `${pending}${line}`.trim();
    pending = '';
    if (full === '') continue;
    const m = /^(\S+)\s*([\s\S]*)$/.exec(full);
    if (m === null) continue;
    const keyword = (m[1] ?? '').toUpperCase();
    if (keyword === 'FROM') stage += 1;
    out.push({ keyword, args: (m[2] ?? '').trim(), stage });
  }
  return out;
}

/** @module ConfigError and the wording of config errors: every message is `path: what is wrong`. */
import { RategateError } from '../errors.js';
import type * as z from 'zod';

/** Thrown for any problem with a config; `errors` holds every problem found, each with its place. */
export class ConfigError extends RategateError {
  readonly code = 'CONFIG_INVALID';
  readonly errors: string[];

  constructor(
    /** The file (or other source) the config came from. */
    readonly source: string,
    errors: readonly string[],
  ) {
    const n = errors.length;
    super(`${source}: invalid config (${n} error${n === 1 ? '' : 's'})\n${errors.map((e) => `  - ${e}`).join('\n')}`);
    this.errors = [...errors];
  }
}

/** The config file could not be read at all (missing, a directory, no permission): nothing to list but that. */
export class ConfigFileUnreadable extends ConfigError {
  constructor(
    readonly file: string,
    readonly why: string,
  ) {
    super(file, [`cannot read the config file: ${why}`]);
  }
}

/** Why a file could not be read, in words: what a person fixes (ENOENT → no such file). */
export function whyUnreadable(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT'
    ? 'no such file'
    : code === 'EACCES'
      ? 'permission denied'
      : code === 'EISDIR'
        ? 'is a directory'
        : String((err as Error).message);
}

export type PathItem = string | number | symbol;

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$-]*$/;

/** `['limits', 2, 'period']` → `limits[2].period`; the root is `(top level)`. */
export function formatPath(path: readonly PathItem[]): string {
  let out = '';
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`;
    else {
      const key = String(p);
      if (IDENT.test(key)) out += out === '' ? key : `.${key}`;
      else out += `[${JSON.stringify(key)}]`;
    }
  }
  return out === '' ? '(top level)' : out;
}

/** How a value is named in a message: strings quoted, containers by kind. */
export function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'a list';
  if (value !== null && typeof value === 'object') return 'a mapping';
  return String(value);
}

const NOUN: Record<string, string> = {
  object: 'a mapping',
  array: 'a list',
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  boolean: 'true or false',
  null: 'null',
};

/**
 * Zod's default texts speak of "Invalid input"; these speak the config's language. Passed per parse,
 * so messages set on a schema (formats, durations) still take precedence.
 */
export const configErrorMap: z.core.$ZodErrorMap = (iss) => {
  // eslint-disable-next-line @typescript-eslint/switch-exhaustiveness-check -- zod's other codes keep zod's text
  switch (iss.code) {
    case 'invalid_type':
      if (iss.input === undefined) return 'required';
      if (iss.expected === 'int' && typeof iss.input === 'number') return `must be an integer, got ${show(iss.input)}`;
      if (
        (iss.expected === 'number' || iss.expected === 'int') &&
        typeof iss.input === 'string' &&
        /^-?[0-9.]+$/.test(iss.input)
      ) {
        return `expected a number, got ${show(iss.input)} (write it without quotes)`;
      }
      return `expected ${NOUN[iss.expected] ?? iss.expected}, got ${show(iss.input)}`;
    case 'invalid_value':
      if (iss.input === undefined) return 'required';
      return `must be one of ${iss.values.map((v) => String(v)).join(', ')} (got ${show(iss.input)})`;
    case 'too_small':
      if (iss.origin === 'array')
        return `must have at least ${String(iss.minimum)} item${iss.minimum === 1 ? '' : 's'}`;
      if (iss.origin === 'string') return 'must not be empty';
      return iss.inclusive === false
        ? `must be greater than ${String(iss.minimum)}, got ${show(iss.input)}`
        : `must be at least ${String(iss.minimum)}, got ${show(iss.input)}`;
    case 'too_big':
      return `must be at most ${String(iss.maximum)}, got ${show(iss.input)}`;
    // Zod's other issue codes keep zod's own text: this switch chooses texts, it decides nothing.
    default:
      return undefined;
  }
};

/** Edit distance counting a swap of neighbours as one edit (`cots` → `cost`), to suggest what a typo meant. */
function distance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  const at = (i: number, j: number): number => d[i]?.[j] ?? 0;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, at(i - 2, j - 2) + 1);
      (d[i] as number[])[j] = v;
    }
  }
  return at(a.length, b.length);
}

/** The known word `value` is most likely a typo of, if any is close enough. */
export function closest(value: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestD = Infinity;
  for (const k of known) {
    const d = distance(value.toLowerCase(), k.toLowerCase());
    if (d < bestD) {
      bestD = d;
      best = k;
    }
  }
  return best !== undefined && bestD <= Math.max(1, Math.floor(best.length / 3)) ? best : undefined;
}

export function unknownKeyMessage(key: string, known: readonly string[]): string {
  const best = closest(key, known);
  if (best !== undefined) return `unknown key (did you mean "${best}"?)`;
  return known.length > 0 ? `unknown key (expected one of: ${known.join(', ')})` : 'unknown key';
}

/** One problem found outside the schema, with its place. */
export interface PathIssue {
  readonly path: readonly PathItem[];
  readonly message: string;
}

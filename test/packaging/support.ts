/**
 * @module Static checkers for the packaging tests (no docker, no helm binary here): a minimal JSON Schema
 * draft-07 validator, a Go-template structure lexer, and a Dockerfile instruction parser.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const CHART = `${ROOT}helm/rategate/`;

export function read(relative: string): string {
  return readFileSync(`${ROOT}${relative}`, 'utf8');
}

// ---------------------------------------------------------------------------------------------------
// JSON Schema (draft-07), only the keywords values.schema.json uses. An unknown keyword is an error, so
// the schema cannot silently rely on something this checker does not enforce.

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type Schema = { [keyword: string]: Json };

const ANNOTATIONS = new Set(['$schema', '$id', 'title', 'description', 'default', 'examples', '$comment', 'definitions']);
const ASSERTIONS = new Set([
  '$ref',
  'type',
  'properties',
  'additionalProperties',
  'required',
  'items',
  'enum',
  'const',
  'pattern',
  'minimum',
  'maximum',
  'minLength',
  'minItems',
  'oneOf',
  'anyOf',
  'if',
  'then',
  'else',
]);

function isObject(v: unknown): v is { [key: string]: Json } {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function typeOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

function hasType(v: unknown, type: string): boolean {
  switch (type) {
    case 'integer':
      return typeof v === 'number' && Number.isInteger(v);
    case 'number':
      return typeof v === 'number';
    default:
      return typeOf(v) === type;
  }
}

function deepEqual(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function resolveRef(root: Schema, ref: string): Schema {
  const m = /^#\/definitions\/([A-Za-z0-9_-]+)$/.exec(ref);
  const defs = root.definitions;
  const target = m && isObject(defs) ? defs[m[1] ?? ''] : undefined;
  if (!isObject(target)) throw new Error(`unresolvable $ref ${ref}`);
  return target;
}

/** Returns every violation as `path: message` (empty when `value` is valid). */
export function validate(schema: Schema, value: unknown, root: Schema = schema, path = '$'): string[] {
  const errors: string[] = [];
  for (const keyword of Object.keys(schema)) {
    if (!ANNOTATIONS.has(keyword) && !ASSERTIONS.has(keyword)) throw new Error(`unsupported keyword "${keyword}" at ${path}`);
  }
  const sub = (s: Json | undefined, v: unknown, p: string): string[] => (isObject(s) ? validate(s, v, root, p) : []);

  if (typeof schema.$ref === 'string') errors.push(...validate(resolveRef(root, schema.$ref), value, root, path));

  const type = schema.type;
  if (type !== undefined) {
    const types = Array.isArray(type) ? type.map(String) : [String(type)];
    if (!types.some((t) => hasType(value, t))) {
      // Wrong type: the other keywords would only add noise.
      return [...errors, `${path}: expected ${types.join(' or ')}, got ${typeOf(value)}`];
    }
  }
  if (Array.isArray(schema.enum) && !schema.enum.some((e) => deepEqual(e, value))) {
    errors.push(`${path}: ${JSON.stringify(value)} is not one of ${JSON.stringify(schema.enum)}`);
  }
  if ('const' in schema && !deepEqual(schema.const, value)) errors.push(`${path}: must be ${JSON.stringify(schema.const)}`);

  if (typeof value === 'string') {
    if (typeof schema.pattern === 'string' && !new RegExp(schema.pattern, 'u').test(value)) {
      errors.push(`${path}: ${JSON.stringify(value)} does not match ${schema.pattern}`);
    }
    if (typeof schema.minLength === 'number' && [...value].length < schema.minLength) {
      errors.push(`${path}: shorter than ${schema.minLength}`);
    }
  }
  if (typeof value === 'number') {
    if (typeof schema.minimum === 'number' && value < schema.minimum) errors.push(`${path}: below ${schema.minimum}`);
    if (typeof schema.maximum === 'number' && value > schema.maximum) errors.push(`${path}: above ${schema.maximum}`);
  }
  if (Array.isArray(value)) {
    if (typeof schema.minItems === 'number' && value.length < schema.minItems) errors.push(`${path}: fewer than ${schema.minItems} items`);
    if (isObject(schema.items)) value.forEach((item, i) => errors.push(...sub(schema.items, item, `${path}[${i}]`)));
  }
  if (isObject(value)) {
    const properties = isObject(schema.properties) ? schema.properties : {};
    if (Array.isArray(schema.required)) {
      for (const key of schema.required) if (typeof key === 'string' && !(key in value)) errors.push(`${path}.${key}: required`);
    }
    for (const [key, v] of Object.entries(value)) {
      if (key in properties) errors.push(...sub(properties[key], v, `${path}.${key}`));
      else if (schema.additionalProperties === false) errors.push(`${path}.${key}: not allowed (additionalProperties: false)`);
      else errors.push(...sub(schema.additionalProperties, v, `${path}.${key}`));
    }
  }
  if (Array.isArray(schema.anyOf)) {
    const results = schema.anyOf.map((s) => sub(s, value, path));
    if (!results.some((r) => r.length === 0)) errors.push(`${path}: matches none of anyOf (${results.flat().join('; ')})`);
  }
  if (Array.isArray(schema.oneOf)) {
    const results = schema.oneOf.map((s) => sub(s, value, path));
    const passing = results.filter((r) => r.length === 0).length;
    if (passing !== 1) errors.push(`${path}: matches ${passing} of oneOf, needs exactly 1 (${results.flat().join('; ')})`);
  }
  if (isObject(schema.if)) {
    const branch = sub(schema.if, value, path).length === 0 ? schema.then : schema.else;
    errors.push(...sub(branch, value, path));
  }
  return errors;
}

// ---------------------------------------------------------------------------------------------------
// Go templates: delimiters, block structure, references.

export interface TemplateLint {
  /** Delimiter and block-structure problems; empty when the file is well formed. */
  readonly problems: string[];
  /** The bodies of every action, comments excluded, without the trim markers. */
  readonly actions: string[];
}

const OPENERS = new Set(['if', 'with', 'range', 'define', 'block']);

export function lintTemplate(text: string): TemplateLint {
  const problems: string[] = [];
  const actions: string[] = [];
  const stack: { keyword: string; line: number }[] = [];
  let at = 0;
  const lineOf = (i: number): number => text.slice(0, i).split('\n').length;
  for (;;) {
    const open = text.indexOf('{{', at);
    const strayClose = text.indexOf('}}', at);
    if (open < 0) {
      if (strayClose >= 0) problems.push(`line ${lineOf(strayClose)}: "}}" without "{{"`);
      break;
    }
    if (strayClose >= 0 && strayClose < open) problems.push(`line ${lineOf(strayClose)}: "}}" without "{{"`);
    const close = text.indexOf('}}', open + 2);
    const nextOpen = text.indexOf('{{', open + 2);
    if (close < 0 || (nextOpen >= 0 && nextOpen < close)) {
      problems.push(`line ${lineOf(open)}: "{{" is not closed before the next action`);
      at = open + 2;
      continue;
    }
    at = close + 2;
    const body = text
      .slice(open + 2, close)
      .replace(/^-\s/, '')
      .replace(/\s-$/, '')
      .trim();
    if (body.startsWith('/*')) {
      if (!body.endsWith('*/')) problems.push(`line ${lineOf(open)}: unterminated comment`);
      continue;
    }
    actions.push(body);
    const keyword = /^[a-z]+/.exec(body)?.[0] ?? '';
    const line = lineOf(open);
    if (OPENERS.has(keyword)) stack.push({ keyword, line });
    else if (keyword === 'else') {
      const top = stack[stack.length - 1];
      if (top === undefined || !['if', 'with', 'range'].includes(top.keyword)) problems.push(`line ${line}: "else" outside if/with/range`);
    } else if (keyword === 'end') {
      if (stack.pop() === undefined) problems.push(`line ${line}: "end" without an opening block`);
    }
  }
  for (const open of stack) problems.push(`line ${open.line}: "${open.keyword}" is never closed with "end"`);
  return { problems, actions };
}

/** Every `.Values.a.b` (or `$.Values.a.b`) path a template text mentions, deduplicated. */
export function valuesPaths(text: string): string[] {
  const paths = new Set<string>();
  for (const m of text.matchAll(/\$?\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)/g)) paths.add((m[1] ?? '').slice(1));
  return [...paths];
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

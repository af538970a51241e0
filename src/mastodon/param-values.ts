/** @module Reading typed values out of a Rack parameter tree, with Rails' casting rules and 422s. */
import { isHash, kindOf, type ParamHash, type ParamValue } from '../rails/rack-params.js';
import { HttpError } from './reply.js';

/** Rails' boolean casting for query and form values (MASTODON.md). */
const FALSE_STRINGS: ReadonlySet<string> = new Set(['0', 'f', 'F', 'false', 'FALSE', 'off', 'OFF']);
// ---------------------------------------------------------------------------------------------

function typeError(name: string, expected: string, got: ParamValue): HttpError {
  return new HttpError(422, `Validation failed: ${name} must be ${expected}, not ${kindOf(got).toLowerCase()}`);
}

/**
 * Rails' boolean: `0 f F false FALSE off OFF` are false, `''` is "not given", any other text is true.
 * JSON's `true`/`false` pass through, `null` is not given, and the number 0 is false.
 */
export function toBool(v: ParamValue | undefined, name = 'parameter'): boolean | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'boolean') return v;
  if (typeof v === 'number') return v !== 0;
  if (typeof v === 'string') {
    if (v === '') return undefined;
    return !FALSE_STRINGS.has(v);
  }
  throw typeError(name, 'a boolean', v);
}

/** A scalar as text (JSON numbers and booleans too); `null` and absence are undefined. */
export function getString(p: ParamHash, key: string, name = key): string | undefined {
  const v = p[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  throw typeError(name, 'a string', v);
}

/** Like getString, but `''` (a form field left empty) also counts as not given. */
export function getPresent(p: ParamHash, key: string, name = key): string | undefined {
  const s = getString(p, key, name);
  return s === undefined || s.trim() === '' ? undefined : s;
}

export function getBool(p: ParamHash, key: string, name = key): boolean | undefined {
  return toBool(p[key], name);
}

/** Whole numbers from text (`"300"`) or JSON numbers; anything else is a 422. */
export function getInt(p: ParamHash, key: string, name = key): number | undefined {
  const v = p[key];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v === 'number' && Number.isInteger(v)) return v;
  if (typeof v === 'string' && /^\s*-?\d{1,15}\s*$/.test(v)) return Number.parseInt(v, 10);
  if (typeof v === 'string' || typeof v === 'number') {
    throw new HttpError(422, `Validation failed: ${name} must be an integer`);
  }
  throw typeError(name, 'an integer', v);
}

export function getHash(p: ParamHash, key: string, name = key): ParamHash | undefined {
  const v = p[key];
  if (v === undefined || v === null) return undefined;
  if (isHash(v)) return v;
  throw typeError(name, 'a hash', v);
}

/** An array of scalars as text, from `a[]=…` or a JSON array. */
export function getStringArray(p: ParamHash, key: string, name = key): string[] | undefined {
  const v = p[key];
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw typeError(name, 'an array', v);
  return v.map((item) => {
    if (typeof item === 'string') return item;
    if (typeof item === 'number' || typeof item === 'boolean') return String(item);
    throw typeError(`${name}[]`, 'a string', item);
  });
}

/**
 * @module The methods a `match:` pattern may name: the standard ones, plus those listed in
 * `methods.custom` (an explicit opt-in, so a typo like `GETT` is an error, not a rule that never matches).
 */
import { METHODS } from 'node:http';
import { parsePattern } from '../../routing/pattern.js';
import { closest, type PathItem } from '../errors.js';

/** The methods of RFC 9110 and PATCH (RFC 5789): what `match:` accepts without `methods.custom`. */
export const STANDARD_METHODS: readonly string[] = [
  'GET',
  'HEAD',
  'POST',
  'PUT',
  'DELETE',
  'CONNECT',
  'OPTIONS',
  'TRACE',
  'PATCH',
];

/**
 * An entry of `methods.custom`: node:http's parser refuses (400) any method outside its own list, so a
 * rule for another one could never match.
 */
export function checkCustomMethod(value: string): string | null {
  if (METHODS.includes(value)) return null;
  if (METHODS.includes(value.toUpperCase())) return `method "${value}" must be uppercase ("${value.toUpperCase()}")`;
  return `"${value}" is not a method the gateway can receive (node:http answers 400 to it), so no rule could match it`;
}

function record(v: unknown): Record<string, unknown> | undefined {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/** Every pattern (limits and body limits) of the raw document naming a method that is not allowed. */
export function methodIssues(top: Record<string, unknown>): Array<{ path: readonly PathItem[]; message: string }> {
  const customRaw = record(top.methods)?.custom;
  const custom = Array.isArray(customRaw) ? customRaw.filter((m): m is string => typeof m === 'string') : [];
  const known = [...STANDARD_METHODS, ...custom];
  const matchLists: Array<[readonly PathItem[], unknown]> = [];
  if (Array.isArray(top.limits))
    top.limits.forEach((r, i) => matchLists.push([['limits', i, 'match'], record(r)?.match]));
  const bodyLimits = record(top.server)?.bodyLimits;
  if (Array.isArray(bodyLimits))
    bodyLimits.forEach((r, i) => matchLists.push([['server', 'bodyLimits', i, 'match'], record(r)?.match]));
  return matchLists.flatMap(([path, match]) => unknownMethodIssues(path, match, known));
}

/** A pattern whose method is neither standard nor listed in methods.custom could never be what was meant. */
function unknownMethodIssues(
  path: readonly PathItem[],
  match: unknown,
  known: readonly string[],
): Array<{ path: readonly PathItem[]; message: string }> {
  const list: unknown[] = typeof match === 'string' ? [match] : Array.isArray(match) ? match : [];
  const issues: Array<{ path: readonly PathItem[]; message: string }> = [];
  list.forEach((p, i) => {
    if (typeof p !== 'string') return;
    const parsed = parsePattern(p);
    const method = parsed.ok ? parsed.pattern.method : null;
    if (method === null || known.includes(method)) return;
    const hint = closest(method, known);
    issues.push({
      path: typeof match === 'string' ? path : [...path, i],
      message: `unknown method "${method}" (${hint !== undefined ? `did you mean "${hint}"? ` : ''}a custom method must be listed in methods.custom)`,
    });
  });
  return issues;
}

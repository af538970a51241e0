/**
 * @module The checks of SPEC §3.1's limit model that are more than a type: a `per:` value against the
 * key-kind table (keys/kinds.ts), and the overrides' relations to their rule. The schema (schema.ts) calls them.
 */
import { KIND_NAMES, KINDS, parsePart } from '../../keys/index.js';
import type { PathIssue } from '../errors.js';

export { paramPath, perError } from '../../keys/index.js';

/** The kinds whose values `overrides[].keys` may name, as `per:` writes them (from the table). */
const KEYED = KIND_NAMES.filter((k) => KINDS[k].overrideKeys).map((k) => KINDS[k].syntax);
const KEYED_TEXT = `${KEYED.slice(0, -1).join(', ')} and ${KEYED.at(-1)!}`;

/** Overrides: a limit below the rule's cost admits nothing; `keys` name values only keyed kinds have. */
export function overrideIssues(r: Record<string, unknown>, i: number, issues: PathIssue[]): void {
  if (!Array.isArray(r.overrides)) return;
  const cost = typeof r.cost === 'number' ? r.cost : 1;
  // A one-kind list is refused by the schema already: no tuple error on top of that.
  const composite = Array.isArray(r.per) && r.per.length >= 2 ? r.per.length : 0;
  const per = typeof r.per === 'string' ? r.per : '';
  const part = per === '' ? null : parsePart(per);
  const keyed = composite > 0 || part === null || typeof part === 'string' || part.spec.overrideKeys;
  (r.overrides as unknown[]).forEach((item, j) => {
    const o = record(item);
    if (o === undefined) return;
    if (typeof o.limit === 'number' && Number.isInteger(o.limit) && o.limit > 0 && o.limit < cost) {
      issues.push({
        path: ['limits', i, 'overrides', j, 'limit'],
        message: `limit ${o.limit} is below the rule's cost ${cost} (no request could ever be admitted)`,
      });
    }
    if (Array.isArray(o.keys) && o.keys.length > 0 && !keyed) {
      issues.push({
        path: ['limits', i, 'overrides', j, 'keys'],
        message: `keys apply to per: ${KEYED_TEXT} rules (this rule is per: ${per}; use ips or accounts)`,
      });
    }
    if (Array.isArray(o.keys))
      tupleIssues(o.keys as unknown[], composite, ['limits', i, 'overrides', j, 'keys'], issues);
    const names = (v: unknown) => Array.isArray(v) && v.length > 0;
    if (!names(o.ips) && !names(o.accounts) && !names(o.keys)) {
      issues.push({ path: ['limits', i, 'overrides', j], message: 'names no client (give ips, accounts or keys)' });
    }
  });
}

/** A composite rule's override keys are tuples, one value per part; a one-kind rule's are plain values. */
function tupleIssues(keys: unknown[], parts: number, path: PathIssue['path'], issues: PathIssue[]): void {
  keys.forEach((k, n) => {
    if (parts === 0 && Array.isArray(k))
      issues.push({
        path: [...path, n],
        message: 'a list of values names a key of a composite per; this rule has one kind',
      });
    if (parts > 0 && (!Array.isArray(k) || k.length !== parts)) {
      issues.push({
        path: [...path, n],
        message: `a composite per of ${parts} kinds takes a list of ${parts} values, one per kind in order`,
      });
    }
  });
}

function record(v: unknown): Record<string, unknown> | undefined {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

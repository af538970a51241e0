/**
 * @module The checks of SPEC §3.1's limit model that are more than a type: `per:` kinds with their
 * header or parameter name, and the overrides' relations to their rule. The schema (schema.ts) calls them.
 */
import { parseKey } from '../../rack-params.js';
import { show } from '../errors.js';
import type { PathIssue } from '../errors.js';
import { HEADER_NAME } from './validators.js';

/** `per:` as written; `header:` and `param:` carry a name. checkPer then reads the name. */
export const PER = /^(ip|account|global|token|header:.*|param:.*|cookie:.*)$/s;
export const PER_HINT = 'ip, account, global, token, header:NAME, param:NAME, cookie:NAME';

/** A cookie name: an RFC 6265 token (cookie names are case-sensitive, so kept as written). */
const COOKIE_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** The error of a `per:` value matching PER, or null. A param name is one value in Rack's bracket notation. */
export function checkPer(v: string): string | null {
  if (v.startsWith('header:')) {
    const name = v.slice(7);
    return HEADER_NAME.test(name) ? null : `invalid header name ${show(name)} in per ${show(v)}`;
  }
  if (v.startsWith('param:')) {
    const name = v.slice(6);
    return paramPath(name) !== undefined
      ? null
      : `invalid parameter name ${show(name)} in per ${show(v)} (Rack bracket notation naming one value, e.g. user[email]; no [] and no unclosed bracket)`;
  }
  if (v.startsWith('cookie:')) {
    const name = v.slice(7);
    return COOKIE_NAME.test(name) ? null : `invalid cookie name ${show(name)} in per ${show(v)} (an RFC 6265 token, e.g. _mastodon_session)`;
  }
  return null;
}

/**
 * A parameter name's bracket path (`user[email]` → ['user', 'email']), or undefined when the name is
 * not one value in Rack notation: empty, an array step `[]`, empty brackets, or a bracket Rack would
 * read as part of a literal name (unbalanced), which an operator surely did not mean.
 */
export function paramPath(name: string): string[] | undefined {
  const path = parseKey(name);
  if (path === undefined || path.includes('')) return undefined;
  if (path.length === 1 && /[[\]]/.test(name.slice(1))) return undefined;
  return path;
}

/** Overrides: a limit below the rule's cost admits nothing; `keys` name values only token/header/param rules have. */
export function overrideIssues(r: Record<string, unknown>, i: number, issues: PathIssue[]): void {
  if (!Array.isArray(r.overrides)) return;
  const cost = typeof r.cost === 'number' ? r.cost : 1;
  const per = typeof r.per === 'string' ? r.per : '';
  const keyed = per === 'token' || per.startsWith('header:') || per.startsWith('param:') || per.startsWith('cookie:');
  (r.overrides as unknown[]).forEach((item, j) => {
    const o = record(item);
    if (o === undefined) return;
    if (typeof o.limit === 'number' && Number.isInteger(o.limit) && o.limit > 0 && o.limit < cost) {
      issues.push({
        path: ['limits', i, 'overrides', j, 'limit'],
        message: `limit ${o.limit} is below the rule's cost ${cost} (no request could ever be admitted)`,
      });
    }
    if (Array.isArray(o.keys) && o.keys.length > 0 && per !== '' && !keyed) {
      issues.push({
        path: ['limits', i, 'overrides', j, 'keys'],
        message: `keys apply to per: token, header:NAME, param:NAME and cookie:NAME rules (this rule is per: ${per}; use ips or accounts)`,
      });
    }
    const names = (v: unknown) => Array.isArray(v) && v.length > 0;
    if (!names(o.ips) && !names(o.accounts) && !names(o.keys)) {
      issues.push({ path: ['limits', i, 'overrides', j], message: 'names no client (give ips, accounts or keys)' });
    }
  });
}

function record(v: unknown): Record<string, unknown> | undefined {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

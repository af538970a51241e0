/**
 * @module Which rules an access log can decide. A log holds the request line, the time, the address and
 * the headers its format names; never the Authorization header, a cookie it does not log, or the body.
 * A rule that needs one of those is "not decidable from this log", with the reason, and is left out of
 * the table replay drives: guessing its key (every request anonymous, say) would report limits that
 * would never have happened, or miss those that would. A ban that counts answers by status needs the
 * log's `$status`; an in-flight limit needs which requests overlapped, which a log of when each request
 * ended does not say: it is never decidable.
 */
import { buildSnapshot } from '../config/index.js';
import type { CompiledRule, Snapshot } from '../config/types.js';
import { compileGuardRules, type CompiledBan } from '../guard/rules.js';
import { NEED, needs } from '../keys/index.js';
import type { FormatFacts } from './record.js';

/** Why `rule` cannot be decided from a log of this format, or null when it can. */
export function undecidableReason(rule: CompiledRule, format: FormatFacts): string | null {
  const n = rule.needs;
  if (needs(n, NEED.account)) return 'needs the account (the owner of a bearer token, which access logs do not hold)';
  if (needs(n, NEED.token)) return 'needs the bearer token (access logs do not hold it)';
  if (needs(n, NEED.params)) return 'needs request parameters (a request body is not logged)';
  if (needs(n, NEED.form)) return '`when.query` also reads a form body (not logged)';
  if (needs(n, NEED.cookie) && !format.headers.has('cookie')) return 'needs a cookie (the log format has no $http_cookie)';
  if (needs(n, NEED.header)) {
    for (const part of rule.key.parts) {
      const name = part.kind === 'header' ? (part.arg as { name: string }).name : null;
      if (name !== null && !format.headers.has(name)) return `needs header ${name} (the log format has no $http_${name.replace(/-/g, '_')})`;
    }
  }
  return null;
}

/** Why a ban cannot be decided from a log of this format, or null when it can. */
export function undecidableBan(ban: CompiledBan, format: FormatFacts): string | null {
  if (ban.on !== null && !format.status) return `counts answers with status ${[...ban.on].join(', ')} (the log format has no $status)`;
  return undecidableReason(ban.rule, format);
}

/** Why no in-flight limit is decidable: replay reads when requests arrived, not which of them overlapped. */
export const IN_FLIGHT_REASON = 'an in-flight limit needs how long each request was in flight, which replay does not read from a log';

export interface SplitTable {
  /** The table with only the limits and bans the log decides (their order kept), and no in-flight limit. */
  readonly decided: Snapshot;
  /** Every limit of the table by name: null when decided, else why not. */
  readonly reasons: ReadonlyMap<string, string | null>;
  /** Every ban by name: null when decided, else why not. */
  readonly banReasons: ReadonlyMap<string, string | null>;
}

/** The table replay drives: the config as loaded, less the limits and bans the log cannot decide, less in-flight limits. */
export function decidableTable(snapshot: Snapshot, format: FormatFacts): SplitTable {
  const reasons = new Map<string, string | null>();
  for (const rule of snapshot.rules) reasons.set(rule.name, undecidableReason(rule, format));
  const banReasons = new Map<string, string | null>();
  for (const ban of compileGuardRules(snapshot.config).bans) banReasons.set(ban.rule.name, undecidableBan(ban, format));
  const config = snapshot.config;
  const limits = config.limits.filter((l) => reasons.get(l.name) === null);
  const bans = config.bans.filter((b) => banReasons.get(b.name) === null);
  return { decided: buildSnapshot({ ...config, limits, bans, concurrency: [] }, snapshot.source), reasons, banReasons };
}

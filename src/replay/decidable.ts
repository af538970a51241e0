/**
 * @module Which rules an access log can decide. A log holds the request line, the time, the address and
 * the headers its format names; never the Authorization header, a cookie it does not log, or the body.
 * A rule that needs one of those is "not decidable from this log", with the reason, and is left out of
 * the table replay drives: guessing its key (every request anonymous, say) would report limits that
 * would never have happened, or miss those that would. A ban that counts answers by status needs the
 * log's `$status`; an in-flight limit needs which requests overlapped, which a log of when each request
 * ended does not say: it is never decidable.
 *
 * What a log cannot know may be assumed, explicitly (`--assume`): `anonymous` (a request whose line shows
 * no credential had none, so `when.authenticated` is decided) and `no-body` (a request sent no body, so
 * `when.query` reads the query alone). An assumption decides a rule's condition, never its key: a rule
 * keyed by the account or a body parameter stays not decidable, as its key would be a guess.
 */
import { buildSnapshot } from '../config/index.js';
import type { CompiledRule, Snapshot } from '../config/types.js';
import { compileGuardRules, type CompiledBan } from '../guard/rules.js';
import { NEED, needs } from '../keys/index.js';
import type { FormatFacts } from './record.js';

/** What replay may be told to assume where the log is silent. */
export const ASSUMPTIONS = {
  anonymous: 'a request whose log line shows no credential was unauthenticated',
  'no-body': 'a request sent no body: its parameters are its query',
} as const;
export type Assumption = keyof typeof ASSUMPTIONS;

export function isAssumption(name: string): name is Assumption {
  return Object.hasOwn(ASSUMPTIONS, name);
}

const NONE: ReadonlySet<Assumption> = new Set();

/**
 * The rule's needs less what the assumptions supply: the account when only `when.authenticated` reads it
 * (not its key, `when.account` or an override by account), the form body when only `when.query` reads it.
 */
function needsUnder(rule: CompiledRule, assume: ReadonlySet<Assumption>): number {
  let n = rule.needs;
  const keyNeeds = rule.key.needs;
  const byAccount =
    rule.whenAccount !== null || rule.overrides.some((o) => o.accounts.length > 0) || needs(keyNeeds, NEED.account);
  if (assume.has('anonymous') && !byAccount) n &= ~NEED.account;
  if (assume.has('no-body') && !needs(keyNeeds, NEED.form)) n &= ~NEED.form;
  return n;
}

/** The assumptions that `rule` is decided under (those that removed a need), in ASSUMPTIONS' order. */
export function assumedBy(rule: CompiledRule, assume: ReadonlySet<Assumption>): Assumption[] {
  const out: Assumption[] = [];
  for (const a of Object.keys(ASSUMPTIONS) as Assumption[]) {
    if (!assume.has(a)) continue;
    if (needsUnder(rule, new Set([a])) !== rule.needs) out.push(a);
  }
  return out;
}

/** Why `rule` cannot be decided from a log of this format (under these assumptions), or null when it can. */
export function undecidableReason(
  rule: CompiledRule,
  format: FormatFacts,
  assume: ReadonlySet<Assumption> = NONE,
): string | null {
  const n = needsUnder(rule, assume);
  if (needs(n, NEED.account)) {
    const anon = needsUnder(rule, new Set(['anonymous'])) !== rule.needs;
    return `needs the account (the owner of a bearer token, which access logs do not hold${anon ? '; --assume anonymous decides it' : ''})`;
  }
  if (needs(n, NEED.token)) return 'needs the bearer token (access logs do not hold it)';
  if (needs(n, NEED.params)) return 'needs request parameters (a request body is not logged)';
  if (needs(n, NEED.form))
    return '`when.query` also reads a form body (not logged; --assume no-body reads the query alone)';
  if (needs(n, NEED.cookie) && !format.headers.has('cookie'))
    return 'needs a cookie (the log format has no $http_cookie)';
  if (needs(n, NEED.header)) {
    for (const part of rule.key.parts) {
      const name = part.kind === 'header' ? (part.arg as { name: string }).name : null;
      if (name !== null && !format.headers.has(name))
        return `needs header ${name} (the log format has no $http_${name.replace(/-/g, '_')})`;
    }
  }
  return null;
}

/** Why a ban cannot be decided from a log of this format, or null when it can. */
export function undecidableBan(
  ban: CompiledBan,
  format: FormatFacts,
  assume: ReadonlySet<Assumption> = NONE,
): string | null {
  if (ban.on !== null && !format.status)
    return `counts answers with status ${[...ban.on].join(', ')} (the log format has no $status)`;
  return undecidableReason(ban.rule, format, assume);
}

/** Why no in-flight limit is decidable: replay reads when requests arrived, not which of them overlapped. */
export const IN_FLIGHT_REASON =
  'an in-flight limit needs how long each request was in flight, which replay does not read from a log';

export interface SplitTable {
  /** The table with only the limits and bans the log decides (their order kept), and no in-flight limit. */
  readonly decided: Snapshot;
  /** Every limit of the table by name: null when decided, else why not. */
  readonly reasons: ReadonlyMap<string, string | null>;
  /** Every ban by name: null when decided, else why not. */
  readonly banReasons: ReadonlyMap<string, string | null>;
}

/** The table replay drives: the config as loaded, less the limits and bans the log cannot decide (under the assumptions), less in-flight limits. */
export function decidableTable(
  snapshot: Snapshot,
  format: FormatFacts,
  assume: ReadonlySet<Assumption> = NONE,
): SplitTable {
  const reasons = new Map<string, string | null>();
  for (const rule of snapshot.rules) reasons.set(rule.name, undecidableReason(rule, format, assume));
  const banReasons = new Map<string, string | null>();
  for (const ban of compileGuardRules(snapshot.config).bans)
    banReasons.set(ban.rule.name, undecidableBan(ban, format, assume));
  const config = snapshot.config;
  const limits = config.limits.filter((l) => reasons.get(l.name) === null);
  const bans = config.bans.filter((b) => banReasons.get(b.name) === null);
  return { decided: buildSnapshot({ ...config, limits, bans, concurrency: [] }, snapshot.source), reasons, banReasons };
}

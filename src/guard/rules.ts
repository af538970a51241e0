/**
 * @module The `bans:` and `concurrency:` sections compiled once per snapshot (like the limit table): each
 * carries a CompiledRule, so a ban or in-flight rule keys a request exactly as a limit rule with the same
 * `per` and `when` would (the pipeline's route-rules.ts matches all three sections in one walk).
 */
import { compileRule } from '../config/compile.js';
import type { Config } from '../config/schema.js';
import type { CompiledRule } from '../config/types.js';
import { KINDS, keyParams, tagOf } from '../keys/index.js';
import { ruleKeyPrefix } from '../limiter/keys.js';
import type { RuleWhen } from '../config/fields/guard.js';

export interface CompiledBan {
  readonly rule: CompiledRule;
  /** `on.status`, or null: every matching request counts. */
  readonly on: ReadonlySet<number> | null;
  readonly limit: number;
  readonly periodMs: number;
  readonly banMs: number;
  /** Live bans this ban may hold; a new one beyond it ends the oldest. */
  readonly maxActive: number;
}

export interface CompiledConcurrency {
  readonly rule: CompiledRule;
  readonly max: number;
  readonly scope: 'local' | 'store';
  /** `<name>:` : the prefix of its slot keys. */
  readonly prefix: string;
}

export interface GuardRules {
  readonly bans: readonly CompiledBan[];
  readonly concurrency: readonly CompiledConcurrency[];
  /** `param:` names the bans and in-flight rules read (added to what the body peek looks for). */
  readonly paramNames: readonly string[];
}

export const NO_GUARD_RULES: GuardRules = Object.freeze({ bans: [], concurrency: [], paramNames: [] });

/** Compiled at load; an empty table compiles to NO_GUARD_RULES, which the request path skips at once. */
export function compileGuardRules(cfg: Pick<Config, 'bans' | 'concurrency'>): GuardRules {
  if (cfg.bans.length === 0 && cfg.concurrency.length === 0) return NO_GUARD_RULES;
  const asRule = (
    r: {
      name: string;
      match: string[];
      per: string | string[];
      missing?: 'skip' | 'ip' | undefined;
      when?: RuleWhen | undefined;
    },
    i: number,
    limit: number,
    period: number,
  ) =>
    compileRule(
      {
        name: r.name,
        match: r.match,
        per: r.per,
        missing: r.missing,
        when: r.when,
        limit,
        period,
        algorithm: 'fixed-window',
        cost: 1,
        shadow: false,
      },
      i,
    );
  const bans = cfg.bans.map((b, i) => ({
    rule: asRule(b, i, b.limit, b.period),
    on: b.on ? new Set(b.on.status) : null,
    limit: b.limit,
    periodMs: b.period,
    banMs: b.ban,
    maxActive: b.maxActive,
  }));
  const concurrency = cfg.concurrency.map((c, i) => ({
    rule: asRule(c, i, c.max, 1000),
    max: c.max,
    scope: c.scope,
    prefix: ruleKeyPrefix(c.name),
  }));
  const all = [...bans.map((b) => b.rule), ...concurrency.map((c) => c.rule)];
  return Object.freeze({ bans, concurrency, paramNames: [...new Set(all.flatMap((r) => keyParams(r.key)))] });
}

/** The IP form of a ban key (what `per: ip` bans produce): refused on every route, not only the ban's. */
export function ipBanKey(ipKey: string): string {
  return tagOf(KINDS.ip, ipKey);
}

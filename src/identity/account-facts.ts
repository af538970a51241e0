/**
 * @module What the upstream says about an account besides its id (Mastodon's `verify_credentials`:
 * `created_at`, `bot`, `locked`), and `when.account`'s test of it. Young accounts are where spam comes
 * from (mastodon/mastodon#9766): a rule can apply to them alone without touching established users.
 */

/** An account's facts; null where the upstream did not say (or said something unreadable). */
export interface AccountFacts {
  /** Epoch ms of `created_at` (Mastodon rounds it down to midnight UTC). */
  readonly createdAt: number | null;
  readonly bot: boolean | null;
  readonly locked: boolean | null;
}

export const UNKNOWN_FACTS: AccountFacts = Object.freeze({ createdAt: null, bot: null, locked: null });

export type AgeOp = '<' | '<=' | '>' | '>=';

/** `when.account`, compiled: each field present is a condition; all must hold. */
export interface AccountCondition {
  readonly age?: { readonly op: AgeOp; readonly ms: number; readonly text: string } | undefined;
  readonly bot?: boolean | undefined;
  readonly locked?: boolean | undefined;
}

/** Written `< 7d`, `>= 30d`, `<12h`: a comparison and a duration. */
export const AGE_PATTERN = /^\s*(<=|>=|<|>)\s*(\S+)\s*$/;

/** The facts in an Account entity; fields it lacks or gives in another type are unknown. */
export function factsOf(entity: Record<string, unknown>): AccountFacts {
  const created = typeof entity.created_at === 'string' ? Date.parse(entity.created_at) : NaN;
  return {
    createdAt: Number.isFinite(created) ? created : null,
    bot: typeof entity.bot === 'boolean' ? entity.bot : null,
    locked: typeof entity.locked === 'boolean' ? entity.locked : null,
  };
}

function compare(value: number, op: AgeOp, bound: number): boolean {
  switch (op) {
    case '<':
      return value < bound;
    case '<=':
      return value <= bound;
    case '>':
      return value > bound;
    case '>=':
      return value >= bound;
  }
}

/**
 * The account's age at `now`. Security: an account whose creation the upstream did not tell (a
 * write-only token it will not name, an upstream error, a server without `created_at`) is taken as
 * created now. "New accounts post less" must not be dodged by making the account unknowable, and an
 * established user's account is known once the upstream answers.
 */
export function accountAge(facts: AccountFacts, now: number): number {
  return facts.createdAt === null ? 0 : Math.max(0, now - facts.createdAt);
}

/**
 * Why `cond` does not hold for the account, or null when it holds. No account never matches. An
 * unknown age counts as 0 (accountAge); an unknown `bot` or `locked` as false, Mastodon's default
 * (both are the account owner's own settings, so no one dodges a rule by hiding them).
 */
export function accountConditionFails(
  cond: AccountCondition,
  accountKey: string | null,
  facts: AccountFacts | null,
  now: number,
): string | null {
  if (accountKey === null) return 'when.account: the request has no account';
  const f = facts ?? UNKNOWN_FACTS;
  if (cond.age !== undefined && !compare(accountAge(f, now), cond.age.op, cond.age.ms)) {
    return `when.account.age: the account is ${describeAge(f, now)}, not ${cond.age.text}`;
  }
  if (cond.bot !== undefined && (f.bot ?? false) !== cond.bot)
    return `when.account.bot: the account is ${cond.bot ? 'not ' : ''}a bot`;
  if (cond.locked !== undefined && (f.locked ?? false) !== cond.locked)
    return `when.account.locked: the account is ${cond.locked ? 'not ' : ''}locked`;
  return null;
}

/** "3d old", or "of unknown age (counted as new)". */
export function describeAge(facts: AccountFacts, now: number): string {
  if (facts.createdAt === null) return 'of unknown age (counted as new)';
  const days = accountAge(facts, now) / 86_400_000;
  return days >= 1 ? `${Math.floor(days)}d old` : `${Math.floor(days * 24)}h old`;
}

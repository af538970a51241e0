/**
 * @module Who a request is, as the rules read it (RuleInputs), and whether a rule applies to it: the tag
 * it keys the request on, or why it gives none (its `when` fails, the request lacks its key).
 */
import type { CompiledRule } from '../config/types.js';
import { whenFails, type RequestFacts } from '../rails/index.js';
import { keyWhat, type KeyFacts } from '../keys/index.js';
import { accountConditionFails, type AccountFacts } from '../identity/account-facts.js';

/** Who the request is, for the rules: what the key kinds read, the client's address (overrides by IP), what `when.query` reads. */
export interface RuleInputs extends KeyFacts {
  readonly client: { readonly address: string };
  /** The account's facts (`when.account`), null when unknown; read only for a request with an account. */
  accountFacts(): AccountFacts | null;
  facts(): Pick<RequestFacts, 'queryHasAny'>;
}

const NO_FACTS: Pick<RequestFacts, 'queryHasAny'> = Object.freeze({ queryHasAny: () => false });

/**
 * A client known by its IP (and account) alone, with no other fact: for callers that decide without a
 * request (benchmarks, the store's tests). Rules keyed on a header, parameter, cookie or token skip it.
 */
export function knownClient(
  client: { readonly address: string; readonly key: string },
  accountKey: string | null = null,
): RuleInputs {
  return {
    client,
    ipKey: client.key,
    accountKey,
    tokenDigest: () => null,
    header: () => undefined,
    cookie: () => undefined,
    param: () => undefined,
    rawToken: () => null,
    accountFacts: () => null,
    facts: () => NO_FACTS,
  };
}

/**
 * The tag a rule keys this request on (keys/rule-key.ts), or null when the rule does not apply: its
 * `when` fails or the request lacks the key. Limits, bans and in-flight rules alike.
 */
export function ruleTag(rule: CompiledRule, who: RuleInputs): string | null {
  if (rule.whenAuthenticated !== undefined && rule.whenAuthenticated !== (who.accountKey !== null)) return null;
  if (rule.whenQuery !== null && !who.facts().queryHasAny(rule.whenQuery, rule.whenQueryPaths!)) return null;
  if (
    rule.whenAccount !== null &&
    accountConditionFails(
      rule.whenAccount,
      who.accountKey,
      who.accountKey === null ? null : who.accountFacts(),
      Date.now(),
    ) !== null
  ) {
    return null;
  }
  return rule.key.tag(who);
}

/** Why ruleTag gave no tag: for the trace (explain, replay) only. */
export function whySkipped(rule: CompiledRule, who: RuleInputs): string {
  const account = { key: who.accountKey, facts: who.accountKey === null ? null : who.accountFacts(), now: Date.now() };
  return (
    whenFails(rule, who.facts(), who.accountKey !== null, account) ??
    `no key: the request has no ${keyWhat(rule.key, who)}`
  );
}

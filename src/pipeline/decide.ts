/**
 * @module The limit decision for one request: identify the client, match the rules, consume every
 * bucket all-or-nothing, and build the rate-limit headers of the answer. Plain requests and WebSocket
 * upgrades both come through here, so they are limited the same way.
 */
import type { CompiledRule } from '../config/types.js';
import { StoreUnavailableError, type BucketState, type ConsumeOutcome, type Store } from '../limiter/types.js';
import type { Metrics } from '../observability/metrics.js';
import { ERROR_BODIES } from '../http/errors.js';
import { admitted, NO_HEADERS, NO_RULES, refusal, type Decision } from './decision.js';
import { rateLimited, rateLimitHeaders } from './rate-limited.js';
import { bucketsFor, isExemptAccount, type BucketInputs, type RequestPolicy } from './policy.js';
import { bodyKindOf, doorkeeperHeaderToken, OVERRIDABLE_METHODS, type RequestFacts } from '../rails/index.js';
import { declaresBody } from '../http/message.js';
import type { RequestView } from './request-view.js';

export type { Decision, DecisionKind } from './decision.js';

const UNMATCHED: Decision = Object.freeze(admitted(NO_HEADERS, NO_RULES, false, 'unmatched'));
const EXEMPT: Decision = Object.freeze(admitted(NO_HEADERS, NO_RULES, true, 'exempt'));
const NO_BUCKET: Decision = Object.freeze(admitted(NO_HEADERS, NO_RULES, true, 'unmatched'));
const BAD_QUERY: Decision = Object.freeze(refusal(400, ERROR_BODIES.QUERY_CONFLICT));

/** What the decision needs besides the request: the store, the metrics, and the store's clock. */
export interface DecideContext {
  readonly store: Store;
  readonly metrics: Metrics;
  /** Epoch ms; the store's clock as near as the gateway knows it (for an early refusal's headers). */
  readonly now: () => number;
  /** Runtime exemptions (the admin API's), beside `exempt.ips`. */
  readonly runtimeExempt?: (address: string) => boolean;
  /** Told the rule and bucket key of each request limited (the triage sketch). */
  readonly onLimited?: (rule: string, bucketKey: string) => void;
}

/** The limit decision for the request `v` describes (its rules already matched by screen()). */
export async function decide(ctx: DecideContext, v: RequestView): Promise<Decision> {
  const { policy, matched, peer, token } = v;
  if (matched.length === 0) return UNMATCHED;
  const client = v.client;
  if (policy.exemptIps !== null && policy.exemptIps.contains(client.address)) return EXEMPT;
  if (ctx.runtimeExempt?.(client.address) === true) return EXEMPT;
  let facts: RequestFacts | null = null;
  if (anyNeedsFacts(matched)) {
    facts = v.facts();
    // A query Rails would refuse is refused here (400) rather than read one way by us and another by Rails.
    if (anyReadsQuery(matched) && !facts.queryReadable()) return BAD_QUERY;
  }
  let account: string | null = null;
  if (needsAccount(matched)) {
    const headerValue = v.accountHeader();
    const known = policy.account.known(token, headerValue, peer.trusted);
    if (known !== undefined) account = known;
    else {
      // Finding the account is an upstream call: a request that the buckets known without it already
      // refuse (a flood with a fresh token each time) must not cost the upstream anything.
      const early = await refuseEarly(ctx, policy, matched, { ipKey: client.key, address: client.address, accountKey: null, accountKnown: false, facts });
      if (early !== null) return early;
      account = await policy.account.resolve(token, headerValue, peer.trusted);
    }
  }
  if (account !== null && isExemptAccount(policy, account)) return EXEMPT;
  const { specs, rules } = bucketsFor(policy, matched, { ipKey: client.key, address: client.address, accountKey: account, accountKnown: true, facts });
  if (specs.length === 0) return NO_BUCKET;

  const { store, metrics } = ctx;
  let outcome: ConsumeOutcome;
  const storeStarted = performance.now();
  try {
    outcome = await store.consume(specs);
  } catch (err) {
    if (!(err instanceof StoreUnavailableError)) throw err;
    return { ...refusal(503, ERROR_BODIES.STORE_UNAVAILABLE, 'store_unavailable'), rules, matched: true };
  }
  metrics.storeDuration.observe((performance.now() - storeStarted) / 1000);
  countDecision(metrics, rules, outcome);
  if (outcome.allowed) return admitted(rateLimitHeaders(policy, rules, outcome), rules, true, 'allowed');
  noteLimited(ctx, rules, specs, outcome);
  return rateLimited(policy, rejecting(rules, outcome), { rules, outcome });
}

/**
 * Reads, without charging, the buckets that need no account; a 429 when one of them has no room,
 * else null. Nothing is charged either way: the full, all-or-nothing consume comes after.
 */
async function refuseEarly(ctx: DecideContext, policy: RequestPolicy, matched: readonly CompiledRule[], who: BucketInputs): Promise<Decision | null> {
  const { specs, rules } = bucketsFor(policy, matched, who);
  if (specs.length === 0) return null;
  let buckets: BucketState[];
  try {
    buckets = await Promise.all(specs.map((spec) => ctx.store.peek(spec)));
  } catch {
    return null; // the store's trouble is the consume's to handle, with its onError policy
  }
  const outcome: ConsumeOutcome = { allowed: false, now: ctx.now(), buckets };
  if (rejecting(rules, outcome) === undefined) return null;
  countDecision(ctx.metrics, rules, outcome);
  noteLimited(ctx, rules, specs, outcome);
  return rateLimited(policy, rejecting(rules, outcome), { rules, outcome });
}

/** The rejecting bucket, for triage (only on a 429: an allowed request costs nothing here). */
function noteLimited(ctx: DecideContext, rules: readonly CompiledRule[], specs: readonly { key: string }[], outcome: ConsumeOutcome): void {
  if (ctx.onLimited === undefined) return;
  for (let i = 0; i < rules.length; i++) {
    if (outcome.buckets[i]!.limited && !rules[i]!.shadow) return ctx.onLimited(rules[i]!.name, specs[i]!.key);
  }
}

function rejecting(rules: readonly CompiledRule[], outcome: ConsumeOutcome): CompiledRule | undefined {
  for (let i = 0; i < rules.length; i++) if (outcome.buckets[i]!.limited && !rules[i]!.shadow) return rules[i];
  return undefined;
}

/**
 * Whether reading the body can change this request's decision, so it is worth holding its first bytes:
 * a POST whose `_method` would match other rules, a matched `param:` rule, or a matched rule that needs
 * the account or keys on the token while the Authorization header carries no token (Doorkeeper then
 * reads `access_token` from the body too).
 * Plain GETs and requests with a bearer header on method-insensitive routes never pay for a peek.
 */
export function bodyCanDecide(v: RequestView): boolean {
  const { req, policy, method, path, matched } = v;
  if (!declaresBody(req)) return false;
  // A body Rails reads no parameters from (an image, octet-stream) holds neither a token nor `_method`.
  const kind = bodyKindOf(method, req.headers['content-type']);
  if (kind === 'opaque') return false;
  const matcher = policy.snapshot.matcher;
  if (method === 'POST' && kind !== 'json') {
    // The matcher returns one frozen array per rule set, so identity says "the same rules".
    for (const m of OVERRIDABLE_METHODS) if (m !== 'POST' && matcher.match(m, path) !== matched) return true;
  }
  // A `param:` rule reads the body; a `when.query` rule a form body (Rack's params merge GET and POST,
  // a GET's form included; Rack parses no JSON, so a JSON body alone is not held for it); an account or
  // a `per: token` rule reads the token, which may be there.
  for (const r of matched) if (r.per === 'param' || (r.whenQuery !== null && kind !== 'json')) return true;
  if (policy.guard.paramNames.length > 0 && guardReadsBody(policy, method, path)) return true;
  return (needsAccount(matched) || keysOnToken(matched)) && doorkeeperHeaderToken(req.headers.authorization) === null;
}

/** A ban or in-flight rule of this route keyed on a parameter (rare: checked only when the table has one). */
function guardReadsBody(policy: RequestPolicy, method: string, path: string): boolean {
  const g = policy.guard;
  for (const r of g.banMatcher?.match(method, path) ?? []) if (r.per === 'param') return true;
  for (const r of g.concurrencyMatcher?.match(method, path) ?? []) if (r.per === 'param') return true;
  return false;
}

function keysOnToken(rules: readonly CompiledRule[]): boolean {
  for (const r of rules) if (r.per === 'token') return true;
  return false;
}

function needsAccount(rules: readonly CompiledRule[]): boolean {
  for (const r of rules) if (r.needsAccount) return true;
  return false;
}

function anyNeedsFacts(rules: readonly CompiledRule[]): boolean {
  for (const r of rules) if (r.needsFacts) return true;
  return false;
}

function anyReadsQuery(rules: readonly CompiledRule[]): boolean {
  for (const r of rules) if (r.whenQuery !== null || r.per === 'param') return true;
  return false;
}

/**
 * Per rule: allowed, or limited for the rules that rejected, or shadow_limited for shadow rules that
 * would have. Rules of a rejected request that had room are not counted: they were not charged.
 */
function countDecision(metrics: Metrics, rules: readonly CompiledRule[], outcome: ConsumeOutcome): void {
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i]!;
    const b = outcome.buckets[i]!;
    const c = metrics.forRule(rule.name);
    if (b.limited) {
      if (rule.shadow) c.shadowLimited++;
      else c.limited++;
    } else if (outcome.allowed) {
      c.allowed++;
      if (b.remaining <= rule.limit * 0.2) c.nearLimit++;
    }
  }
}

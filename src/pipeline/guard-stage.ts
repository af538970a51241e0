/**
 * @module The guard's stages after the reading, before any counting: `account` (the account looked up
 * when a ban or in-flight rule of the route keys on it — what needs no upstream call refusing first),
 * `bans` (bans on other keys; the keys to count for bans once the answer is known) and `slots`
 * (in-flight slots). A ban or in-flight rule keys a request as a limit rule with the same `per` and
 * `when` does (policy.ts ruleTag). A table without bans or in-flight rules makes each a couple of checks
 * and no promise.
 */
import type { CompiledRule } from '../config/types.js';
import type { Guard } from '../guard/guard.js';
import { NO_GUARD_RULES } from '../guard/rules.js';
import { isClientIpKey, NEED, needs } from '../keys/index.js';
import { bucketKey } from '../limiter/keys.js';
import type { ScreenContext } from './context.js';
import { ACCOUNT_STEPS } from './decide.js';
import { GO_ON, verdictOf, type Stage, type Verdict } from './drive.js';
import { BANNED } from './block-stage.js';
import { rateLimited } from './rate-limited.js';
import type { RequestView } from './request-view.js';
import { ruleTag, whySkipped } from './rule-inputs.js';
import type { Screening } from './screening.js';
import type { GuardNote } from './trace.js';

/** The guard when this request has ban or in-flight rules to run (none: the stage passes). */
function guardFor(ctx: ScreenContext, v: RequestView): Guard | undefined {
  if (ctx.guard === undefined || v.policy.guard === NO_GUARD_RULES || v.exempt(ctx.runtimeExempt)) return undefined;
  return ctx.guard;
}

/**
 * The account, looked up once per request (kept on the view) only when a ban or in-flight rule of this
 * route keys on it and it is not known without I/O. Before the upstream is asked, what needs no upstream
 * refuses first (decide.ts `ACCOUNT_STEPS`).
 */
export const accountStage: Stage = {
  name: 'account',
  run(ctx, s) {
    const v = s.view;
    if (guardFor(ctx, v) === undefined || !keysOnAccount(v) || v.knownAccount() !== undefined) return GO_ON;
    return verdictOf(ACCOUNT_STEPS, 0, ctx, s);
  },
};

/** Bans on a token, account, header, parameter or cookie refuse the request; the bans it matched are kept to count its answer. */
export const banStage: Stage = {
  name: 'bans',
  run(ctx, s) {
    const v = s.view;
    const guard = guardFor(ctx, v);
    if (guard === undefined) return GO_ON;
    if (bannedElsewhere(guard, v)) return BANNED;
    for (const r of v.rules.bans) {
      const key = guardTag(r, v, v.trace?.bans);
      if (key !== null) (s.banHits ??= []).push({ ban: v.policy.guard.bans[r.index]!, key });
    }
    return GO_ON;
  },
};

/** The route's in-flight slots, in table order; the first full one refuses (429). */
export const slotStage: Stage = {
  name: 'slots',
  run(ctx, s) {
    const guard = guardFor(ctx, s.view);
    return guard === undefined ? GO_ON : enterSlots(guard, s, 0);
  },
};

/** Whether a ban or in-flight rule of this route keys on the account. */
function keysOnAccount(v: RequestView): boolean {
  return needs(v.rules.needs, NEED.account) && (anyNeedsAccount(v.rules.bans) || anyNeedsAccount(v.rules.slots));
}

/** A ban on a token, account, header, parameter or cookie refuses every request carrying that key, on any route. */
function bannedElsewhere(guard: Guard, v: RequestView): boolean {
  for (const b of v.policy.guard.bans) {
    if (isClientIpKey(b.rule.key) || !guard.bans.has(b.rule.name)) continue;
    // The account is not looked up for a ban of another route: only a known one (a cache hit) is checked.
    if (needs(b.rule.needs, NEED.account) && v.knownAccount() === undefined) continue;
    const key = ruleTag(b.rule, v);
    if (key !== null && guard.bans.banned(b.rule.name, key)) {
      guard.metrics?.bannedRequests.labels(b.rule.name).inc();
      return true;
    }
  }
  return false;
}

/** Takes the in-flight slots of the route from the `from`-th on; each taken is released when the exchange ends. */
function enterSlots(guard: Guard, s: Screening, from: number): Verdict | Promise<Verdict> {
  const v = s.view;
  const slots = v.rules.slots;
  for (let i = from; i < slots.length; i++) {
    const r = slots[i]!;
    const key = guardTag(r, v, v.trace?.slots);
    if (key === null) continue;
    const c = v.policy.guard.concurrency[r.index]!;
    return guard.slots.enter(c, bucketKey(c.prefix, key)).then((release) => {
      if (release === null) {
        guard.metrics?.concurrencyLimited.labels(r.name).inc();
        s.banHits = null; // refused before counting: its answer counts for no ban
        return rateLimited(v.policy, r, 'in-flight');
      }
      s.ending.held(release);
      return enterSlots(guard, s, i + 1);
    });
  }
  return GO_ON;
}

/** A ban or in-flight rule's key for this request (null: it does not apply), noted in the trace when there is one. */
function guardTag(rule: CompiledRule, v: RequestView, notes: GuardNote[] | undefined): string | null {
  const tag = ruleTag(rule, v);
  notes?.push({ rule, tag, why: tag === null ? whySkipped(rule, v) : null });
  return tag;
}

function anyNeedsAccount(rules: readonly CompiledRule[]): boolean {
  for (const r of rules) if (needs(r.needs, NEED.account)) return true;
  return false;
}

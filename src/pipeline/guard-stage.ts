/**
 * @module The gateway's two attack-day stages, kept apart from the pipeline: `guardEarly` (runtime
 * blocks and IP bans, before anything else) and `guardStage` (bans on other keys, the keys to count for
 * bans after the answer, and in-flight slots), both before any counting. A ban or in-flight rule keys a
 * request as a limit rule with the same `per` and `when` does (policy.ts ruleTag). A table without bans
 * or in-flight rules and a store without runtime entries make both a couple of checks and no promise.
 */
import type http from 'node:http';
import type { CompiledRule } from '../config/types.js';
import { ERROR_BODIES } from '../http/errors.js';
import type { Guard, Release } from '../guard/guard.js';
import { ipBanKey, NO_GUARD_RULES, type CompiledBan } from '../guard/rules.js';
import { isClientIpKey, NEED, needs } from '../keys/index.js';
import { bucketKey } from '../limiter/keys.js';
import { refusal, type Decision } from './decision.js';
import { rateLimited } from './rate-limited.js';
import type { RequestView } from './request-view.js';
import { ruleTag, whySkipped } from './policy.js';
import type { GuardNote } from './trace.js';

/** A ban the request matched, and its key: counted once its answer is known. */
export interface BanHit {
  readonly ban: CompiledBan;
  readonly key: string;
}

/** Banned and blocked clients get Mastodon's IP-block answer: nothing tells them which. */
export const BLOCKED_RUNTIME: Decision = Object.freeze(refusal(403, ERROR_BODIES.FORBIDDEN, 'blocked'));
export const BANNED: Decision = Object.freeze(refusal(403, ERROR_BODIES.FORBIDDEN, 'banned'));

type RuntimeExempt = ((address: string) => boolean) | undefined;

/** Runtime blocks and IP bans: refused 403 before anything else (never counted, never forwarded). */
export function guardEarly(guard: Guard, v: RequestView, runtimeExempt: RuntimeExempt): Decision | null {
  const blocks = guard.runtimeBlocks();
  if (blocks !== null && blocks.contains(v.client.address)) {
    guard.metrics?.blockedRequests.labels('runtime').inc();
    return BLOCKED_RUNTIME;
  }
  const ban = guard.ipBan(ipBanKey(v.client.key));
  if (ban !== null && !v.exempt(runtimeExempt)) {
    guard.metrics?.bannedRequests.labels(ban).inc();
    return BANNED;
  }
  return null;
}

export interface GuardResult {
  readonly refusal: Decision | null;
  readonly banHits: readonly BanHit[] | null;
}

export const PASS: GuardResult = Object.freeze({ refusal: null, banHits: null });

/**
 * Bans on other keys and in-flight slots; `onEnd` registers what to run when the exchange ends, however
 * it ends. The account is looked up (once per request, kept on the view) only when a ban or in-flight
 * rule of this route keys on it.
 */
export function guardStage(guard: Guard, v: RequestView, runtimeExempt: RuntimeExempt, onEnd: (release: Release) => void): GuardResult | Promise<GuardResult> {
  if (v.policy.guard === NO_GUARD_RULES || v.exempt(runtimeExempt)) return PASS;
  if (keysOnAccount(v)) {
    const account = v.resolveAccount();
    if (account instanceof Promise) return account.then(() => bansThenSlots(guard, v, onEnd));
  }
  return bansThenSlots(guard, v, onEnd);
}

/** Whether a ban or in-flight rule of this route keys on the account. */
function keysOnAccount(v: RequestView): boolean {
  return needs(v.rules.needs, NEED.account) && (anyNeedsAccount(v.rules.bans) || anyNeedsAccount(v.rules.slots));
}

/**
 * Whether the guard stage would look the account up with an upstream call (not known without I/O):
 * the caller first runs what needs no upstream (decide.ts `beforeIntrospection`).
 */
export function guardIntrospects(v: RequestView, runtimeExempt: RuntimeExempt): boolean {
  if (v.policy.guard === NO_GUARD_RULES || !keysOnAccount(v) || v.exempt(runtimeExempt)) return false;
  return v.knownAccount() === undefined;
}

function bansThenSlots(guard: Guard, v: RequestView, onEnd: (release: Release) => void): GuardResult | Promise<GuardResult> {
  if (bannedElsewhere(guard, v)) return { refusal: BANNED, banHits: null };
  let hits: BanHit[] | null = null;
  for (const r of v.rules.bans) {
    const key = guardTag(r, v, v.trace?.bans);
    if (key !== null) (hits ??= []).push({ ban: v.policy.guard.bans[r.index]!, key });
  }
  return enterSlots(guard, v, 0, onEnd, hits);
}

/** A ban on a token, account, header, parameter or cookie refuses every request carrying that key, on any route. */
function bannedElsewhere(guard: Guard, v: RequestView): boolean {
  for (const b of v.policy.guard.bans) {
    if (isClientIpKey(b.rule.key) || !guard.hasBans(b.rule.name)) continue;
    // The account is not looked up for a ban of another route: only a known one (a cache hit) is checked.
    if (needs(b.rule.needs, NEED.account) && v.knownAccount() === undefined) continue;
    const key = ruleTag(b.rule, v);
    if (key !== null && guard.banned(b.rule.name, key)) {
      guard.metrics?.bannedRequests.labels(b.rule.name).inc();
      return true;
    }
  }
  return false;
}

/** Takes the in-flight slots of the route from the `from`-th on; the first full one refuses (429). */
function enterSlots(guard: Guard, v: RequestView, from: number, onEnd: (release: Release) => void, hits: BanHit[] | null): GuardResult | Promise<GuardResult> {
  const slots = v.rules.slots;
  for (let i = from; i < slots.length; i++) {
    const r = slots[i]!;
    const key = guardTag(r, v, v.trace?.slots);
    if (key === null) continue;
    const c = v.policy.guard.concurrency[r.index]!;
    return guard.enter(c, bucketKey(c.prefix, key)).then((release) => {
      if (release === null) {
        guard.metrics?.concurrencyLimited.labels(r.name).inc();
        return { refusal: rateLimited(v.policy, r, 'in-flight'), banHits: null };
      }
      onEnd(release);
      return enterSlots(guard, v, i + 1, onEnd, hits);
    });
  }
  return hits === null ? PASS : { refusal: null, banHits: hits };
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

/** After the answer: counts the request in each ban it matched whose `on` takes this status. */
export function countBans(guard: Guard, hits: readonly BanHit[], status: number): void {
  for (const h of hits) if (h.ban.on === null || h.ban.on.has(status)) guard.count(h.ban, h.key);
}

/** Runs `release` when the exchange ends, however it ends: answered, aborted, or already over. */
export function whenDone(res: http.ServerResponse, req: http.IncomingMessage, release: Release): void {
  if (res.writableFinished || res.destroyed || req.socket.destroyed) release();
  else res.once('close', release);
}

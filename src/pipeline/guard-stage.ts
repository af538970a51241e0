/**
 * @module The gateway's two attack-day stages, kept apart from the pipeline: `guardEarly` (runtime
 * blocks and IP bans, before anything else) and `guardStage` (bans on other keys, the keys to count for
 * bans after the answer, and in-flight slots), both before any counting. A table without bans or
 * in-flight rules and a store without runtime entries make both a couple of null checks.
 */
import type http from 'node:http';
import type { ClientIp } from '../identity/index.js';
import { ERROR_BODIES } from '../http/errors.js';
import type { Guard, Release } from '../guard/guard.js';
import { guardKey, ipBanKey, NO_GUARD_RULES, type CompiledBan, type GuardWho } from '../guard/rules.js';
import { NO_RULES, refusal, type Decision } from './decision.js';
import { rateLimited } from './rate-limited.js';
import type { RequestView } from './request-view.js';
import type { RequestPolicy } from './policy.js';

/** A ban the request matched, and its key: counted once its answer is known. */
export interface BanHit {
  readonly ban: CompiledBan;
  readonly key: string;
}

/** Banned and blocked clients get Mastodon's IP-block answer: nothing tells them which. */
export const BLOCKED_RUNTIME: Decision = Object.freeze(refusal(403, ERROR_BODIES.FORBIDDEN, 'blocked'));
export const BANNED: Decision = Object.freeze(refusal(403, ERROR_BODIES.FORBIDDEN, 'banned'));

function isExempt(guard: Guard, policy: RequestPolicy, address: string): boolean {
  if (policy.exemptIps !== null && policy.exemptIps.contains(address)) return true;
  const runtime = guard.runtimeExempts();
  return runtime !== null && runtime.contains(address);
}

/** Runtime blocks and IP bans: refused 403 before anything else (never counted, never forwarded). */
export function guardEarly(guard: Guard, policy: RequestPolicy, client: ClientIp): Decision | null {
  const blocks = guard.runtimeBlocks();
  if (blocks !== null && blocks.contains(client.address)) {
    guard.metrics?.blockedRequests.labels('runtime').inc();
    return BLOCKED_RUNTIME;
  }
  const ban = guard.ipBan(ipBanKey(client.key));
  if (ban !== null && !isExempt(guard, policy, client.address)) {
    guard.metrics?.bannedRequests.labels(ban).inc();
    return BANNED;
  }
  return null;
}

export interface GuardResult {
  readonly refusal: Decision | null;
  readonly banHits: readonly BanHit[] | null;
}

const PASS: GuardResult = Object.freeze({ refusal: null, banHits: null });

/** Bans on other keys and in-flight slots; `onEnd` registers what to run when the exchange ends, however it ends. */
export async function guardStage(guard: Guard, g: RequestView, onEnd: (release: Release) => void): Promise<GuardResult> {
  const { policy } = g;
  const rules = policy.guard;
  if (rules === NO_GUARD_RULES || isExempt(guard, policy, g.client.address)) return PASS;
  const bans = rules.banMatcher?.match(g.method, g.path) ?? NO_RULES;
  const slots = rules.concurrencyMatcher?.match(g.method, g.path) ?? NO_RULES;
  let who: GuardWho | undefined;
  const whoFor = async (): Promise<GuardWho> => {
    if (who !== undefined) return who;
    const facts = g.facts();
    let account: string | null | undefined;
    if (rules.needsAccount) {
      const header = g.accountHeader();
      account = policy.account.known(g.token, header, g.peer.trusted);
      // Asked of the upstream only for a request a ban or in-flight rule of its route keys on the account.
      if (account === undefined && (bans.some((r) => r.needsAccount) || slots.some((r) => r.needsAccount))) {
        account = await policy.account.resolve(g.token, header, g.peer.trusted);
      }
    }
    return (who = { ipKey: g.client.key, account, facts });
  };

  // A ban on a token, account, header or parameter refuses every request carrying that key.
  for (const b of rules.bans) {
    if (b.rule.per === 'ip' || !guard.hasBans(b.rule.name)) continue;
    const key = guardKey(b.rule, await whoFor());
    if (key !== null && guard.banned(b.rule.name, key)) {
      guard.metrics?.bannedRequests.labels(b.rule.name).inc();
      return { refusal: BANNED, banHits: null };
    }
  }

  let hits: BanHit[] | null = null;
  for (const r of bans) {
    const key = guardKey(r, await whoFor());
    if (key !== null) (hits ??= []).push({ ban: rules.bans[r.index]!, key });
  }

  for (const r of slots) {
    const c = rules.concurrency[r.index]!;
    const key = guardKey(r, await whoFor());
    if (key === null) continue;
    const release = await guard.enter(c, `${c.prefix}{${key}}`);
    if (release === null) {
      guard.metrics?.concurrencyLimited.labels(r.name).inc();
      return { refusal: rateLimited(policy, r, 'in-flight'), banHits: null };
    }
    onEnd(release);
  }
  return hits === null ? PASS : { refusal: null, banHits: hits };
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

/**
 * @module The driver of the stages: runs an ordered list (screen.ts STAGES) on one request until a
 * stage answers, and is the one place that tells a value from a promise. A stage returns its verdict —
 * go on, an answer, or a promise of either when it waits for I/O — and never asks what it was given:
 * a request decided without I/O runs every stage in one turn with no promise made; a stage that waits
 * resumes the list from the next stage once it settles.
 */
import type { Decision } from './decision.js';
import type { ScreenContext } from './context.js';
import type { Screening } from './screening.js';

/** A stage's "nothing to say: the next stage decides". */
export const GO_ON: unique symbol = Symbol('go on');

/** Go on, or the request's answer (a refusal, or the limit stage's decision). */
export type Verdict = typeof GO_ON | Decision;

export interface Stage {
  /** As logs and traces name it (`blocks`, `head`, `read`, `account`, `bans`, `slots`, `limits`). */
  readonly name: string;
  run(ctx: ScreenContext, s: Screening): Verdict | Promise<Verdict>;
}

/**
 * Runs `stages` on `s` from the first; `s.ending` is told the outcome. Undefined when it was told in this
 * turn; else a promise that settles once it has been (it never rejects: a throw is the ending's `failed`).
 */
export function drive(stages: readonly Stage[], ctx: ScreenContext, s: Screening): void | Promise<void> {
  return runFrom(stages, 0, ctx, s);
}

function runFrom(stages: readonly Stage[], from: number, ctx: ScreenContext, s: Screening): void | Promise<void> {
  let verdict: Verdict | Promise<Verdict>;
  try {
    verdict = verdictOf(stages, from, ctx, s);
  } catch (err) {
    return s.ending.failed(err);
  }
  if (verdict instanceof Promise)
    return verdict.then(
      (settled) => settle(s, settled),
      (err: unknown) => s.ending.failed(err),
    );
  settle(s, verdict);
}

/**
 * The verdict of `stages` from `from` on: the first answer, or GO_ON when none answered; a value when no
 * stage waited, else a promise (which rejects when a stage throws after a wait). A stage made of steps
 * (decide.ts: the account's) runs them through here too, so that no stage tells a value from a promise.
 */
export function verdictOf(
  stages: readonly Stage[],
  from: number,
  ctx: ScreenContext,
  s: Screening,
): Verdict | Promise<Verdict> {
  let verdict: Verdict | Promise<Verdict> = GO_ON;
  let i = from;
  for (; i < stages.length && verdict === GO_ON; i++) verdict = stages[i]!.run(ctx, s);
  if (verdict instanceof Promise) {
    const next = i;
    return verdict.then((settled) => (settled === GO_ON ? verdictOf(stages, next, ctx, s) : settled));
  }
  return verdict;
}

function settle(s: Screening, verdict: Verdict): void {
  if (verdict === GO_ON) return s.ending.failed(new Error(`no stage answered ${s.view.method} ${s.view.path}`));
  answer(s, verdict);
}

function answer(s: Screening, decision: Decision): void {
  s.decision = decision;
  s.ending.screened(s);
}

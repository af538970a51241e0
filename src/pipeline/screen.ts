/**
 * @module The stages every request goes through before its ending, as one ordered list: block and
 * runtime guard (block-stage.ts), drain, path and header checks and the route's one match
 * (head-stage.ts), the reading (read-stage.ts), the account a ban or in-flight rule keys on, bans and
 * in-flight slots (guard-stage.ts), the limit decision (decide.ts). The driver (drive.ts) runs them:
 * `serve` with the socket's request and the upgrade path with the upgrade's head (gateway.ts), `explain`
 * and `replay` with a described request, a memory store and a clock of their own — one decision,
 * whoever asks. Adding a stage is one entry here; wrapping each (a span, a timer) is a map over STAGES.
 */
import type http from 'node:http';
import type { Release } from '../guard/slots.js';
import { blockStage } from './block-stage.js';
import type { ScreenContext } from './context.js';
import { LIMIT_STAGES } from './decide.js';
import { drive, type Stage } from './drive.js';
import { accountStage, banStage, slotStage } from './guard-stage.js';
import { headStage } from './head-stage.js';
import { readStage } from './read-stage.js';
import type { RequestView } from './request-view.js';
import { Screening, type BodySource, type Ending, type Screened } from './screening.js';

export type { Ending, Screened } from './screening.js';
export type { ScreenContext } from './context.js';

/**
 * In order: what refuses cheapest first, the store last. Read-only by its type, not frozen: V8 (node 20
 * and 22) loads a frozen array's elements through the generic keyed-load stub, ~70 instructions for each
 * stage of each request where a plain array's load is inlined (a loop over 8 stages: 3× slower frozen).
 */
export const STAGES: readonly Stage[] = [
  blockStage,
  headStage,
  readStage,
  accountStage,
  banStage,
  slotStage,
  ...LIMIT_STAGES,
];

/**
 * Screens the request `v` describes; `ending` is told how (in this same turn when no stage waited).
 * `body`: the socket's request (read only when a rule needs it), the whole body as bytes, or null (an
 * upgrade: never read). `res`: a socket's plain request, whose client may wait on `Expect: 100-continue`.
 */
export function screen(
  ctx: ScreenContext,
  v: RequestView,
  body: BodySource,
  res: http.ServerResponse | undefined,
  ending: Ending,
  stages: readonly Stage[] = STAGES,
): void | Promise<void> {
  return drive(stages, ctx, new Screening(v, body, res, ending));
}

/** The same, as a promise of the screened request: for callers that wait anyway (an upgrade, explain). */
export function screened(
  ctx: ScreenContext,
  v: RequestView,
  body: BodySource,
  held: (release: Release) => void,
  stages: readonly Stage[] = STAGES,
): Promise<Screened> {
  return new Promise(
    (resolve, reject) => void screen(ctx, v, body, undefined, { screened: resolve, failed: reject, held }, stages),
  );
}

/**
 * @module The stages every request goes through before its ending, with no socket needed: block and
 * runtime guard, drain check, path normalization, header and size checks, one match of the route's
 * rules, the reading (read-stage.ts), bans and in-flight slots (guard-stage.ts), the limit decision
 * (decide.ts). `serve` calls it with the socket's request; `explain` (and next `replay`) with a described
 * request, a memory store and a clock of their own: one decision, whoever asks. A request decided
 * without I/O gets its answer as a value; a promise only where something was awaited.
 */
import type http from 'node:http';
import type { Readable } from 'node:stream';
import { ERROR_BODIES, GATEWAY_ERRORS, badPathBody, type GatewayErrorCode } from '../http/errors.js';
import type { Guard, Release } from '../guard/guard.js';
import { NO_GUARD_RULES } from '../guard/rules.js';
import { NEED, needs } from '../keys/index.js';
import { duplicatedHeader, type RequestParams } from '../rails/index.js';
import { connectionListed, namesFraming } from '../proxy/hop-by-hop.js';
import { normalizePath } from '../routing/index.js';
import { beforeIntrospection, decide, type DecideContext } from './decide.js';
import { refusal, type Decision, type DecisionKind } from './decision.js';
import { guardEarly, guardIntrospects, guardStage, PASS, type BanHit, type GuardResult } from './guard-stage.js';
import { readStage, type BodySource, type ReadOutcome } from './read-stage.js';
import type { RequestView } from './request-view.js';

export interface ScreenContext extends DecideContext {
  /** Runtime blocks, exemptions, bans and in-flight slots (absent: none of them). */
  readonly guard?: Guard | undefined;
  /** The listener's drain: once draining, new requests are answered 503. */
  readonly drain?: { readonly draining: boolean } | undefined;
}

/** What the stages before the ending found: a refusal to write, or what the ending needs. */
export interface Screened {
  readonly decision: Decision;
  /** The request, each fact found once (its path: the raw target when it could not be normalized). */
  readonly view: RequestView;
  /** What goes upstream: the normalized path and the query. */
  readonly target: string;
  readonly maxBody: number;
  /** What to forward instead of the request itself after a body peek; null: the request. */
  readonly body: Readable | null;
  /** X-HTTP-Method-Override is not what Rails routes by: it must not reach the upstream. */
  readonly dropOverrideHeader: boolean;
  /** Bans the request matched, counted once its answer is known; null: none. */
  readonly banHits: readonly BanHit[] | null;
}

export const SHUTTING_DOWN: Decision = Object.freeze(catalogued('SHUTTING_DOWN'));
export const TOO_LARGE: Decision = Object.freeze(catalogued('PAYLOAD_TOO_LARGE'));
const DUPLICATE_CONTENT_TYPE: Decision = Object.freeze(catalogued('DUPLICATE_CONTENT_TYPE'));
const DUPLICATE_AUTHORIZATION: Decision = Object.freeze(catalogued('DUPLICATE_AUTHORIZATION'));
/** `Connection` naming a framing header: the hop-by-hop strip would change where the request ends. */
export const CONNECTION_FRAMING: Decision = Object.freeze(catalogued('CONNECTION_NAMES_FRAMING'));
/** `block.ips`: Mastodon's IP blocks answer 403 with this body. */
const BLOCKED: Decision = Object.freeze(catalogued('FORBIDDEN', 'blocked'));
const BAD_QUERY: Decision = Object.freeze(catalogued('QUERY_CONFLICT'));

/**
 * Screens the request `v` describes. `body`: the socket's request (read only when a rule needs it), the
 * whole body as bytes, or null (an upgrade: never read). `res` is there for a socket's plain request:
 * a client waiting on `Expect: 100-continue` is told to send its body when it is read.
 */
export function screen(
  ctx: ScreenContext,
  v: RequestView,
  body: BodySource,
  res: http.ServerResponse | undefined,
  onEnd: (release: Release) => void,
): Screened | Promise<Screened> {
  const head = screenHead(ctx, v);
  if (typeof head !== 'number') return refused(head, v);
  const read = readStage(v, body, res);
  return read instanceof Promise ? read.then((r) => afterRead(ctx, v, r, head, onEnd)) : afterRead(ctx, v, read, head, onEnd);
}

/** The checks before anything is read: a refusal, or the request's largest body (its route is then matched). */
function screenHead(ctx: ScreenContext, v: RequestView): Decision | number {
  const { policy, req } = v;
  // Decided before anything else: a blocked client is never counted, never forwarded.
  if (policy.blockIps !== null && policy.blockIps.contains(v.client.address)) {
    ctx.guard?.metrics?.blockedRequests.labels('config').inc();
    return BLOCKED;
  }
  if (ctx.guard !== undefined && ctx.guard.hasEarly()) {
    const early = guardEarly(ctx.guard, v, ctx.runtimeExempt);
    if (early !== null) return early;
  }
  if (ctx.drain?.draining === true) return SHUTTING_DOWN;
  const target = normalizePath(v.path);
  if (!target.ok) return refusal(GATEWAY_ERRORS.BAD_PATH.status, badPathBody(target.reason));
  v.path = target.path;
  v.query = target.query;
  const dup = duplicatedHeader(req.rawHeaders);
  if (dup !== null) return dup === 'content-type' ? DUPLICATE_CONTENT_TYPE : DUPLICATE_AUTHORIZATION;
  if (namesFraming(connectionListed(req.headers.connection))) return CONNECTION_FRAMING;
  // Refused before counting: a request that will not be served must not spend anyone's tokens.
  const maxBody = policy.maxBodySize(v.method, v.path);
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > maxBody) return TOO_LARGE;
  v.rules = policy.routeRules.of(v.method, v.path);
  return maxBody;
}

function afterRead(ctx: ScreenContext, v: RequestView, read: ReadOutcome, maxBody: number, onEnd: (release: Release) => void): Screened | Promise<Screened> {
  if ('refusal' in read) return refused(read.refusal, v);
  // A query Rails would refuse is refused here (400) rather than read one way by us and another by Rails.
  if (needs(v.rules.needs, NEED.query) && !v.exempt(ctx.runtimeExempt) && !v.facts().queryReadable()) return refused(BAD_QUERY, v);
  if (ctx.guard !== undefined && guardIntrospects(v, ctx.runtimeExempt)) {
    // The guard would ask the upstream for the account: what needs no upstream call refuses first.
    return beforeIntrospection(ctx, v).then((early) => (early !== null ? refused(early, v) : guarded(ctx, v, read.params, maxBody, onEnd)));
  }
  return guarded(ctx, v, read.params, maxBody, onEnd);
}

/** Bans on other keys and in-flight slots: before any counting. */
function guarded(ctx: ScreenContext, v: RequestView, p: RequestParams, maxBody: number, onEnd: (release: Release) => void): Screened | Promise<Screened> {
  const g = ctx.guard !== undefined && v.policy.guard !== NO_GUARD_RULES ? guardStage(ctx.guard, v, ctx.runtimeExempt, onEnd) : PASS;
  return g instanceof Promise ? g.then((r) => afterGuard(ctx, v, p, maxBody, r)) : afterGuard(ctx, v, p, maxBody, g);
}

function afterGuard(ctx: ScreenContext, v: RequestView, p: RequestParams, maxBody: number, g: GuardResult): Screened | Promise<Screened> {
  if (g.refusal !== null) return refused(g.refusal, v);
  const d = decide(ctx, v);
  return d instanceof Promise ? d.then((decision) => screened(decision, v, p, maxBody, g)) : screened(d, v, p, maxBody, g);
}

function screened(decision: Decision, view: RequestView, p: RequestParams, maxBody: number, g: GuardResult): Screened {
  return { decision, view, target: view.path + view.query, maxBody, body: p.body, dropOverrideHeader: p.dropOverrideHeader, banHits: g.banHits };
}

export function refused(decision: Decision, view: RequestView): Screened {
  return { decision, view, target: '', maxBody: 0, body: null, dropOverrideHeader: false, banHits: null };
}

/** A refusal straight from the error catalogue: its status and its pre-serialized body. */
function catalogued(code: GatewayErrorCode, kind: DecisionKind = 'rejected'): Decision {
  return refusal(GATEWAY_ERRORS[code].status, ERROR_BODIES[code], kind);
}

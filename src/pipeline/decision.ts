/** @module What the stages before an ending decide about a request, and the shapes of the gateway's own answers. */
import type { CompiledRule } from '../config/types.js';
import type { ConsumeOutcome } from '../limiter/types.js';
import { ERROR_BODIES, GATEWAY_ERRORS, type GatewayErrorCode } from '../http/errors.js';

/** How the decision went, as the access log names it. */
export type DecisionKind =
  'allowed' | 'limited' | 'unmatched' | 'exempt' | 'rejected' | 'blocked' | 'banned' | 'store_unavailable';

export interface Decision {
  readonly admit: boolean;
  /** The gateway's answer when not admitted (429, 503). */
  readonly status: number;
  readonly body: Buffer | undefined;
  /** Rate-limit headers for the answer, as flat name/value pairs. */
  readonly headers: readonly string[];
  /** A 429's whole head when prebuilt (refusal-head.ts): Content-Type, Content-Length, then `headers`. */
  readonly head?: readonly string[] | undefined;
  /** The rules whose buckets were charged (or would have been), in table order. */
  readonly rules: readonly CompiledRule[];
  /** On a 429, the rule that rejected: the first non-shadow rule whose bucket had no room. */
  readonly rejectedBy: CompiledRule | undefined;
  /** Some rule matched the route: the upstream's own rate-limit headers are then replaced. */
  readonly matched: boolean;
  readonly kind: DecisionKind;
  /** The store's answer for `rules` (same order), when the store was asked: explain and replay read the headline from it. */
  readonly outcome?: ConsumeOutcome | undefined;
}

export const NO_HEADERS: readonly string[] = Object.freeze([]);
export const NO_RULES: readonly CompiledRule[] = Object.freeze([]);

/**
 * Every decision is made here, its fields always in this order: one object shape for all of them, so
 * the code that reads a decision sees one shape (not one per literal) and a 429 builds no slow literal.
 */
export function decision(
  admit: boolean,
  status: number,
  body: Buffer | undefined,
  headers: readonly string[],
  head: readonly string[] | undefined,
  rules: readonly CompiledRule[],
  rejectedBy: CompiledRule | undefined,
  matched: boolean,
  kind: DecisionKind,
  outcome: ConsumeOutcome | undefined,
): Decision {
  return { admit, status, body, headers, head, rules, rejectedBy, matched, kind, outcome };
}

export function admitted(
  headers: readonly string[],
  rules: readonly CompiledRule[],
  matched: boolean,
  kind: DecisionKind,
  outcome?: ConsumeOutcome,
): Decision {
  return decision(true, 0, undefined, headers, undefined, rules, undefined, matched, kind, outcome);
}

/** A gateway-made refusal that charged nothing (400, 403, 413, 503 …). */
export function refusal(status: number, body: Buffer, kind: DecisionKind = 'rejected'): Decision {
  return decision(false, status, body, NO_HEADERS, undefined, NO_RULES, undefined, false, kind, undefined);
}

/** A refusal straight from the error catalogue: its status and its pre-serialized body. */
export function catalogued(code: GatewayErrorCode, kind: DecisionKind = 'rejected'): Decision {
  return refusal(GATEWAY_ERRORS[code].status, ERROR_BODIES[code], kind);
}

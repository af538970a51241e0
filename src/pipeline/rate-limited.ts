/**
 * @module The one 429: its status (the error catalogue's RATE_LIMITED), its body (`responses.body`,
 * whose default is the catalogue's message) and its headers, whether a bucket or an in-flight limit refused.
 */
import type { CompiledRule } from '../config/types.js';
import type { ConsumeOutcome } from '../limiter/types.js';
import { GATEWAY_ERRORS } from '../http/errors.js';
import { decision, NO_RULES, type Decision } from './decision.js';
import { appendRateLimitHeaders, type ResetFormat } from './ratelimit-headers.js';
import type { RequestPolicy } from './policy.js';
import { refusalHead } from './refusal-head.js';

/** An in-flight limit frees a slot when a request ends: retrying a second later is the honest hint. */
const RETRY_IN_A_SECOND: readonly string[] = Object.freeze(['Retry-After', '1']);

/**
 * The rate-limited answer. `limits`: the rules charged and the store's outcome (bucket limits: the
 * rate-limit headers of the bucket that refused), or 'in-flight' (a concurrency rule: Retry-After 1).
 */
export function rateLimited(
  policy: RequestPolicy,
  rejectedBy: CompiledRule | undefined,
  limits:
    | {
        readonly rules: readonly CompiledRule[];
        readonly outcome: ConsumeOutcome;
        readonly headers?: readonly string[];
      }
    | 'in-flight',
): Decision {
  const status = GATEWAY_ERRORS.RATE_LIMITED.status;
  if (limits === 'in-flight')
    return decision(
      false,
      status,
      policy.limitedBody,
      RETRY_IN_A_SECOND,
      undefined,
      NO_RULES,
      rejectedBy,
      false,
      'limited',
      undefined,
    );
  if (limits.headers !== undefined)
    return decision(
      false,
      status,
      policy.limitedBody,
      limits.headers,
      undefined,
      limits.rules,
      rejectedBy,
      true,
      'limited',
      limits.outcome,
    );
  // The head as the last refusal's when nothing in it differs (refusal-head.ts): a flood builds it once a second.
  const prebuilt = refusalHead(policy, limits.rules, limits.outcome);
  return decision(
    false,
    status,
    policy.limitedBody,
    prebuilt.headers,
    prebuilt.head,
    limits.rules,
    rejectedBy,
    true,
    'limited',
    limits.outcome,
  );
}

/** The rate-limit headers of any answer to a matched request (allowed or refused), as the config formats them. */
export function rateLimitHeaders(
  policy: RequestPolicy,
  rules: readonly CompiledRule[],
  outcome: ConsumeOutcome,
): string[] {
  const headers: string[] = [];
  const responses = policy.snapshot.config.responses;
  appendRateLimitHeaders(headers, rules, outcome, responses.reset as ResetFormat, responses.standardHeaders);
  return headers;
}

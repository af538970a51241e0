/**
 * @module The 429's kept head (pipeline/refusal-head.ts): whatever the states, the rules and the clock's
 * steps, the head a refusal gets is the one built afresh for it, value for value.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { jsonHead } from '../../src/http/errors.js';
import type { ConsumeOutcome } from '../../src/limiter/types.js';
import { buildRequestPolicy } from '../../src/pipeline/policy.js';
import { rateLimitHeaders } from '../../src/pipeline/rate-limited.js';
import { forgetRefusalHead, refusalHead, sameSecondsUntil } from '../../src/pipeline/refusal-head.js';

const TABLE = `limits:
  - { name: a, match: /api/*, per: ip, limit: 5, period: 1m }
  - { name: b, match: /api/*, per: ip, limit: 100, period: 1h }
  - { name: c, match: /api/*, per: ip, limit: 3, period: 10s, shadow: true }
`;
const policyOf = (responses: string) =>
  buildRequestPolicy(parseConfig(`${responses}${TABLE}`, 't.yaml'), async () => ({ kind: 'anonymous' }));
const POLICIES = [
  policyOf(''),
  policyOf('responses: { reset: delta }\n'),
  policyOf('responses: { reset: unix, standardHeaders: false }\n'),
  policyOf('responses: { body: { error: slow down } }\n'),
];

afterEach(() => forgetRefusalHead());

/** A bucket's state relative to a base time: a few states repeat, so that heads are reused. */
const bucket = fc.record({
  remaining: fc.constantFrom(0, 1, 4, 99),
  limited: fc.boolean(),
  resetIn: fc.constantFrom(-500, 0, 999, 1000, 1001, 30_000, 59_999),
  retryIn: fc.constantFrom(-1, 0, 1, 500, 1000, 29_001),
});

describe('the kept 429 head', () => {
  it('is, for every refusal of a sequence, the head built afresh for it', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            policy: fc.nat(POLICIES.length - 1),
            step: fc.constantFrom(0, 1, 7, 250, 999, 1000, 1500),
            states: fc.array(bucket, { minLength: 3, maxLength: 3 }),
            fresh: fc.boolean(),
          }),
          { minLength: 1, maxLength: 40 },
        ),
        (steps) => {
          forgetRefusalHead();
          const base = 1_700_000_000_123;
          let now = base;
          let states = steps[0]!.states;
          for (const s of steps) {
            now += s.step;
            // Half the refusals keep the last states (a flood on one bucket), the others move on.
            if (s.fresh) states = s.states;
            const policy = POLICIES[s.policy]!;
            const rules = [...policy.snapshot.rules];
            // At least one non-shadow bucket refused: what a 429 is.
            const buckets = states.map((b, i) => ({
              remaining: b.remaining,
              limited: b.limited || i === 0,
              resetAt: base + b.resetIn,
              retryAt: base + b.retryIn,
            }));
            const outcome: ConsumeOutcome = { allowed: false, now, buckets };
            const kept = refusalHead(policy, rules, outcome);
            const built = rateLimitHeaders(policy, rules, outcome);
            expect(kept.headers).toEqual(built);
            expect(kept.head).toEqual(jsonHead(policy.limitedBody, built));
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('is reused for the same inputs within the same second, and built again when a second passes', () => {
    const policy = POLICIES[0]!;
    const rules = [...policy.snapshot.rules];
    const at = 1_700_000_000_000;
    const outcome = (now: number): ConsumeOutcome => ({
      allowed: false,
      now,
      buckets: [
        { remaining: 0, limited: true, resetAt: at + 60_000, retryAt: at + 60_000 },
        { remaining: 90, limited: false, resetAt: at + 3_600_000, retryAt: at },
        { remaining: 3, limited: false, resetAt: at + 10_000, retryAt: at },
      ],
    });
    const first = refusalHead(policy, rules, outcome(at + 1));
    expect(refusalHead(policy, [...rules], outcome(at + 999))).toBe(first);
    const next = refusalHead(policy, rules, outcome(at + 1000));
    expect(next).not.toBe(first);
    expect(next.headers).toContain('59');
    expect(first.headers).toContain('60');
  });

  it('names the first instant at which a whole-seconds count changes', () => {
    expect(sameSecondsUntil(10_000, 0)).toBe(1_000);
    expect(sameSecondsUntil(10_000, 999)).toBe(1_000);
    expect(sameSecondsUntil(10_000, 1_000)).toBe(2_000);
    expect(sameSecondsUntil(10_500, 0)).toBe(500);
    expect(sameSecondsUntil(10_000, 9_999)).toBe(10_000);
    expect(sameSecondsUntil(10_000, 10_000)).toBe(Infinity);
  });
});

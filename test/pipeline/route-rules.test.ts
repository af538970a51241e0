/** @module RouteRuleIndex.of (pipeline/route-rules.ts): each (method, path) gets its own rules, the last one asked again included. */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { ACCOUNT_STEPS, LIMIT_STAGES } from '../../src/pipeline/decide.js';
import { buildRequestPolicy } from '../../src/pipeline/policy.js';
import { STAGES } from '../../src/pipeline/screen.js';

const policy = buildRequestPolicy(
  parseConfig(
    `limits:
  - { name: api, match: /api/*, per: ip, limit: 10, period: 1m }
  - { name: post-status, match: POST /api/v1/statuses, per: ip, limit: 5, period: 1m }
  - { name: status-read, match: GET /api/v1/statuses/:id, per: ip, limit: 20, period: 1m }
`,
    't.yaml',
  ),
  async () => ({ kind: 'anonymous' }),
);
const names = (method: string, path: string): string[] => policy.routeRules.of(method, path).limits.map((r) => r.name);

describe('RouteRuleIndex.of', () => {
  it('answers each request by its own method and path, however the requests before it were routed', () => {
    // Repeats, a change of path, of method only, a path one character longer, and back.
    const asked: [string, string, string[]][] = [
      ['GET', '/api/v1/statuses/1', ['api', 'status-read']],
      ['GET', '/api/v1/statuses/1', ['api', 'status-read']],
      ['POST', '/api/v1/statuses/1', ['api']],
      ['POST', '/api/v1/statuses', ['api', 'post-status']],
      ['GET', '/api/v1/statuses', ['api']],
      ['GET', '/other', []],
      ['GET', '/other', []],
      ['GET', '/api/v1/statuses/12', ['api', 'status-read']],
      ['GET', '/api/v1/statuses/1/context', ['api']],
      ['POST', '/api/v1/statuses', ['api', 'post-status']],
      ['POST', '/api/v1/statuses', ['api', 'post-status']],
    ];
    for (const [method, path, want] of asked) expect(names(method, path), `${method} ${path}`).toEqual(want);
    // The same set of rules is the same object, asked again or not.
    expect(policy.routeRules.of('GET', '/api/v1/statuses/7')).toBe(policy.routeRules.of('GET', '/api/v1/statuses/8'));
  });
});

describe('the lists every request loops over', () => {
  // V8 (node 20 and 22) loads a frozen array's elements through its generic keyed-load stub, ~70
  // instructions a load, where a plain array's load is inlined: they stay read-only by type only.
  it("are plain arrays: the stages, the account steps and each route's rules", () => {
    for (const list of [STAGES, ACCOUNT_STEPS, LIMIT_STAGES]) expect(Object.isFrozen(list)).toBe(false);
    for (const path of ['/api/v1/statuses/1', '/other']) {
      const rules = policy.routeRules.of('GET', path);
      for (const list of [rules.limits, rules.bans, rules.slots]) expect(Object.isFrozen(list)).toBe(false);
    }
  });
});

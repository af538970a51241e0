/** @module The one 429 (pipeline/rate-limited.ts): status from the catalogue, body from the config (the catalogue's message by default), headers per kind of limit. */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { GATEWAY_ERRORS } from '../../src/http/errors.js';
import { buildRequestPolicy } from '../../src/pipeline/policy.js';
import { rateLimited } from '../../src/pipeline/rate-limited.js';

const TABLE = 'limits:\n  - { name: api, match: /api/*, per: ip, limit: 1, period: 1m }\n';
const policyOf = (yaml: string) => buildRequestPolicy(parseConfig(yaml, 't.yaml'), async () => ({ kind: 'anonymous' }));

describe('the 429 answer', () => {
  it('has the catalogue entry as the schema default body, and the catalogue status', () => {
    const policy = policyOf(TABLE);
    expect(policy.snapshot.config.responses.body).toEqual({ error: GATEWAY_ERRORS.RATE_LIMITED.message });
    const rule = policy.snapshot.rules[0]!;
    const d = rateLimited(policy, rule, 'in-flight');
    expect(d.status).toBe(GATEWAY_ERRORS.RATE_LIMITED.status);
    expect(JSON.parse(d.body!.toString())).toEqual({ error: GATEWAY_ERRORS.RATE_LIMITED.message });
    expect(d.headers).toEqual(['Retry-After', '1']);
    expect(d).toMatchObject({ admit: false, kind: 'limited', rejectedBy: rule, matched: false, rules: [] });
  });

  it('carries the refusing bucket’s rate-limit headers and the configured body on a bucket limit', () => {
    const policy = policyOf(`responses: { body: { error: slow down, code: 7 } }\n${TABLE}`);
    const rule = policy.snapshot.rules[0]!;
    const now = 1_000_000;
    const outcome = {
      allowed: false,
      now,
      buckets: [{ remaining: 0, resetAt: now + 60_000, limited: true, retryAt: now + 30_000 }],
    };
    const d = rateLimited(policy, rule, { rules: [rule], outcome });
    expect(d.status).toBe(429);
    expect(JSON.parse(d.body!.toString())).toEqual({ error: 'slow down', code: 7 });
    const h = new Map<string, string>();
    for (let i = 0; i < d.headers.length; i += 2) h.set(d.headers[i]!, d.headers[i + 1]!);
    expect(h.get('Retry-After')).toBe('30');
    expect(h.get('X-RateLimit-Remaining')).toBe('0');
    expect(h.get('X-RateLimit-Limit')).toBe('1');
    expect(d).toMatchObject({ matched: true, rules: [rule], rejectedBy: rule });
  });
});

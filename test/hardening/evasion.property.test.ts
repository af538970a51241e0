/**
 * Property: no disguise of a limited route both evades its bucket and reaches the upstream. A disguise
 * is anything a lenient server would still route to the same place: doubled or trailing slashes,
 * percent-encoded characters (any case), dot segments, encoded dots and slashes.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { normalizePath } from '../../src/routing/index.js';
import { readFileSync } from 'node:fs';
import { send } from '../support/http.js';
import { SEED_TABLE, sharedGatewayFixture } from '../support/gateway.js';

const snapshot = parseConfig(readFileSync('config/limits.yaml', 'utf8'), 'limits.yaml');
const names = (method: string, path: string) => snapshot.matcher.match(method, path).map((r) => r.name);

const ROUTES: Array<[string, string]> = [
  ['POST', '/api/v1/accounts'],
  ['POST', '/api/v1/media'],
  ['DELETE', '/api/v1/statuses/123'],
  ['POST', '/api/v1/statuses/123/unreblog'],
];

const hex = (c: string, upper: boolean) => {
  const h = c.charCodeAt(0).toString(16).padStart(2, '0');
  return `%${upper ? h.toUpperCase() : h}`;
};

/** One path segment, written in a random way that a lenient server decodes back to the same segment. */
const disguisedSegment = (seg: string) =>
  fc
    .array(fc.tuple(fc.boolean(), fc.boolean()), { minLength: seg.length, maxLength: seg.length })
    .map((flags) => [...seg].map((c, i) => (flags[i]![0] ? hex(c, flags[i]![1]) : c)).join(''));

/** Extra material between segments: nothing, more slashes, `.`, `x/..`, or the encoded forms. */
const junk = fc.constantFrom(
  '',
  '',
  '',
  '/',
  '//',
  '/.',
  '/./',
  '/x/..',
  '/%2e',
  '/%2E%2e',
  '/x/%2e%2e',
  '%2F',
  '%5C',
  '\\',
);

/** Mostly disguises a lenient server accepts, so that many get past the 400 and meet the bucket. */
const mildJunk = fc.oneof(
  { weight: 12, arbitrary: fc.constantFrom('', '', '/', '//') },
  { weight: 1, arbitrary: junk },
);

function disguise(path: string, gap: fc.Arbitrary<string> = junk) {
  const segs = path.split('/').slice(1);
  return fc
    .tuple(
      fc.tuple(...segs.map(disguisedSegment)),
      fc.array(gap, { minLength: segs.length + 1, maxLength: segs.length + 1 }),
    )
    .map(([parts, gaps]) => parts.map((p, i) => `${gaps[i]}/${p}`).join('') + gaps[segs.length]);
}

describe('bucket evasion', () => {
  for (const [method, path] of ROUTES) {
    it(`no disguise of ${method} ${path} is both accepted and counted elsewhere`, () => {
      const expected = names(method, path);
      fc.assert(
        fc.property(disguise(path), (d) => {
          const r = normalizePath(d);
          if (!r.ok) return; // 400: never forwarded
          expect(r.path).toBe(path);
          expect(names(method, r.path)).toEqual(expected);
        }),
        { numRuns: 3000 },
      );
    });
  }
});

describe('bucket evasion end to end', () => {
  const { upstream, gw } = sharedGatewayFixture(SEED_TABLE, { graceMs: 200 });

  it('lets at most 5 disguised sign-ups from one IP reach the upstream', async () => {
    const samples = fc.sample(disguise('/api/v1/accounts', mildJunk), { numRuns: 200, seed: 42 });
    const statuses: number[] = [];
    for (const path of samples) {
      statuses.push(
        (await send(gw.url, { method: 'POST', path, headers: { 'X-Forwarded-For': '203.0.113.9' } })).status,
      );
    }
    const reached = upstream.forwarded().filter((s) => s.method === 'POST');
    expect(reached.length).toBeLessThanOrEqual(5);
    expect(reached.every((s) => s.url === '/api/v1/accounts')).toBe(true);
    expect(statuses.every((s) => s === 200 || s === 400 || s === 429)).toBe(true);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThan(0);
  });
});

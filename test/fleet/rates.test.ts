/**
 * What a replica publishes of its rates for the others' status pages (fleet/rates.ts): read back as
 * written, bounded whatever the table, and read defensively (another version's replica, a corrupt key).
 */
import { describe, expect, it } from 'vitest';
import { MAX_RATES_BYTES, decodeRates, encodeRates, type ReplicaRates } from '../../src/fleet/rates.js';

const r = (allowed: number, limited = 0, shadowLimited = 0) => ({ allowed, limited, shadowLimited });

describe("a replica's published rates", () => {
  it('read back as written, rounded to what a page shows', () => {
    const rates: ReplicaRates = {
      host: 'web-1',
      pid: 7,
      at: 1_000,
      rules: { 'ip-access': [r(12.34567, 1), r(10)], 'sign-up': [r(0), r(0, 0.5)] },
    };
    expect(decodeRates(encodeRates(rates))).toEqual({
      ...rates,
      rules: { 'ip-access': [r(12.346, 1), r(10)], 'sign-up': [r(0), r(0, 0.5)] },
    });
  });

  it('stay within MAX_RATES_BYTES for a huge table, and say they were cut', () => {
    const rules = Object.fromEntries(
      Array.from({ length: 5_000 }, (_, i) => [`rule-with-a-long-name-${i}`, [r(i), r(i)] as const]),
    );
    const json = encodeRates({ host: 'h', pid: 1, at: 0, rules });
    expect(json.length).toBeLessThanOrEqual(MAX_RATES_BYTES);
    expect(decodeRates(json)?.partial).toBe(true);
  });

  it('are refused when not JSON or not this shape, and lose only the entries that are not rates', () => {
    for (const bad of ['', 'nope', 'null', '[]', '{"host":1}', '{"host":"h","pid":1,"at":0}'])
      expect(decodeRates(bad)).toBeUndefined();
    const odd = JSON.stringify({
      host: 'h',
      pid: 1,
      at: 0,
      rules: {
        ok: [
          [1, 0, 0],
          [1, 0, 0],
        ],
        neg: [
          [-1, 0, 0],
          [1, 0, 0],
        ],
        short: [[1]],
        str: 'x',
      },
    });
    expect(Object.keys(decodeRates(odd)!.rules)).toEqual(['ok']);
  });
});

/** lastIndexOfCode answers as String#lastIndexOf for one character, over random strings and every `from`. */
import { describe, expect, it } from 'vitest';
import { lastIndexOfCode } from '../../src/routing/last-index.js';

describe('lastIndexOfCode', () => {
  it('agrees with String#lastIndexOf for every from, including below 0 and past the end', () => {
    const alphabet = ':,.]a1';
    let seed = 7;
    const rand = (n: number): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
    for (let t = 0; t < 500; t++) {
      let s = '';
      for (let i = rand(12); i > 0; i--) s += alphabet[rand(alphabet.length)];
      for (const ch of ':,.]') {
        expect(lastIndexOfCode(s, ch.charCodeAt(0)), `${s} ${ch}`).toBe(s.lastIndexOf(ch));
        for (let from = -2; from <= s.length + 1; from++)
          expect(lastIndexOfCode(s, ch.charCodeAt(0), from), `${s} ${ch} ${from}`).toBe(s.lastIndexOf(ch, from));
      }
    }
  });
});

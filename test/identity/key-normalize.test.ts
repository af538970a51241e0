/** `param:` key normalization: Ruby's strip set and downcase, as Rack::Attack and Devise apply them. */
import { describe, expect, it } from 'vitest';
import { normalizeParamKey, rubyDowncase, rubyStrip } from '../../src/identity/key-normalize.js';

describe('param: key normalization', () => {
  it("strips exactly Ruby's set (NUL, \\t \\n \\v \\f \\r, space) on both sides, nothing else", () => {
    expect(rubyStrip('\0\t\n\v\f\r a@b \0\r\n')).toBe('a@b');
    // JS trim would remove these; Ruby's strip keeps them, so two different Ruby keys stay two.
    expect(rubyStrip('\u00a0a\u2003')).toBe('\u00a0a\u2003');
    expect(rubyStrip('\ufeffa')).toBe('\ufeffa');
    expect(rubyStrip('a\0b')).toBe('a\0b');
    expect(rubyStrip('\0\0')).toBe('');
  });

  it('downcases code point by code point, as Ruby does (no final-sigma rule)', () => {
    expect(rubyDowncase('Victim@Example.COM')).toBe('victim@example.com');
    expect(rubyDowncase('ΑΣ')).toBe('ασ');
    expect(rubyDowncase('İ')).toBe('i\u0307');
    expect(rubyDowncase('ẞ')).toBe('ß');
  });

  it('maps every capitalisation and padding of one address to one key', () => {
    const keys = new Set(
      ['Victim@Example.COM', 'victim@example.com', ' victim@example.com\0', '\0VICTIM@EXAMPLE.COM\t'].map(
        normalizeParamKey,
      ),
    );
    expect([...keys]).toEqual(['victim@example.com']);
  });
});

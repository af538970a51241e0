/**
 * @module How a `param:` key value is normalized before it is digested: as Rack::Attack's default
 * discriminator normalizer (`to_s.strip.downcase`) and Devise's case-insensitive, stripped keys read
 * it, so `Victim@Example.COM`, `victim@example.com` and `victim@example.com\0` are one bucket.
 */

/** Ruby's String#strip set (checked with Ruby 3.1): NUL, \t, \n, \v, \f, \r and space. Not NBSP. */
function isRubySpace(c: number): boolean {
  return c === 0x20 || (c >= 0x09 && c <= 0x0d) || c === 0x00;
}

/** Ruby's `String#strip`: unlike JS `trim`, it removes NUL and leaves Unicode spaces (NBSP…) alone. */
export function rubyStrip(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && isRubySpace(s.charCodeAt(start))) start++;
  while (end > start && isRubySpace(s.charCodeAt(end - 1))) end--;
  return start === 0 && end === s.length ? s : s.slice(start, end);
}

/**
 * Ruby's `String#downcase` (full Unicode mapping, no context rules): code point by code point, so a
 * final `Σ` becomes `σ` as in Ruby, not the `ς` JS's context-sensitive toLowerCase makes of it.
 */
export function rubyDowncase(s: string): string {
  // The common case (ASCII) needs no per-code-point walk.
  // eslint-disable-next-line no-control-regex -- the test is for ASCII, NUL included
  if (/^[\x00-\x7f]*$/.test(s)) return s.toLowerCase();
  let out = '';
  for (const ch of s) out += ch.toLowerCase();
  return out;
}

/** The value a `param:` rule digests: Ruby-stripped, then downcased. */
export function normalizeParamKey(value: string): string {
  return rubyDowncase(rubyStrip(value));
}

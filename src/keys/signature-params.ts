/**
 * @module A draft-cavage `Signature:` header read as Mastodon reads it (app/lib/signature_parser.rb,
 * its Parslet grammar): an optional leading `Signature ` (an old node-http-signature bug), then
 * `token BWS "=" BWS (token | quoted-string)` parameters separated by `BWS "," BWS`, to the end of the
 * header; anything else is a parse error and the request is unsigned. The parameters fill a hash in
 * order, so a name given twice keeps its LAST value, and names are exact (`KEYID` is not `keyId`). A
 * quoted value is its text between the quotes, backslashes kept, as Mastodon keeps them. Any other
 * reading lets a client show the gateway one keyId and Mastodon another (issue 38, finding 2).
 */

/** Ruby's `\s`: space, \t, \n, \v, \f, \r. */
function isSpace(c: number): boolean {
  return c === 0x20 || (c >= 0x09 && c <= 0x0d);
}

/** `[0-9a-zA-Z!#$%&'*+.^_`|~-]` as a 128-entry table: a lookup per character on the request path. */
const TOKEN_CHAR = new Uint8Array(128);
for (const c of "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!#$%&'*+.^_`|~-")
  TOKEN_CHAR[c.charCodeAt(0)] = 1;

function tokenEnd(s: string, from: number): number {
  let i = from;
  while (i < s.length && s.charCodeAt(i) < 128 && TOKEN_CHAR[s.charCodeAt(i)] === 1) i++;
  return i;
}

function spacesEnd(s: string, from: number): number {
  let i = from;
  while (i < s.length && isSpace(s.charCodeAt(i))) i++;
  return i;
}

/**
 * Where the next backslash of the header being read stands (at or after the scan), or the header's
 * length when there is none: kept across the quoted values of one header, so that searching for it
 * never re-reads a stretch (a header of many short quoted values costs one pass, not one per value).
 */
let nextSlash = 0;

/** The index after the `"` closing the quoted string opened at `open` (`\` takes the next character), or -1. */
function quotedEnd(s: string, open: number): number {
  let i = open + 1;
  let quote = s.indexOf('"', i);
  while (quote >= 0) {
    if (nextSlash < i) nextSlash = slashFrom(s, i);
    if (nextSlash > quote) return quote + 1;
    // The backslash takes the character after it, a quote or not; both searches only move forward.
    i = nextSlash + 2;
    if (quote < i) quote = s.indexOf('"', i);
  }
  return -1;
}

function slashFrom(s: string, from: number): number {
  const at = s.indexOf('\\', from);
  return at < 0 ? s.length : at;
}

const BUGGY_PREFIX = 'Signature ';

/**
 * The value of parameter `name` (exact, case-sensitive) in a `Signature:` header as Mastodon parses
 * it: the last one given; undefined when the header does not parse (no signature at all) or has no
 * such parameter. One linear pass, no regular expression, no allocation but the value returned.
 */
export function cavageParam(header: string, name: string): string | undefined {
  let i = header.startsWith(BUGGY_PREFIX) ? BUGGY_PREFIX.length : 0;
  nextSlash = -1;
  let from = -1;
  let to = -1;
  for (;;) {
    const keyEnd = tokenEnd(header, i);
    if (keyEnd === i) return undefined;
    const isName = keyEnd - i === name.length && header.startsWith(name, i);
    i = spacesEnd(header, keyEnd);
    if (header.charCodeAt(i) !== 0x3d /* = */) return undefined;
    i = spacesEnd(header, i + 1);
    const valueEnd = header.charCodeAt(i) === 0x22 ? quotedEnd(header, i) : tokenEnd(header, i);
    if (valueEnd <= i) return undefined;
    // A quoted value without its quotes; a later parameter of the same name replaces it.
    if (isName) {
      const quoted = header.charCodeAt(i) === 0x22;
      from = quoted ? i + 1 : i;
      to = quoted ? valueEnd - 1 : valueEnd;
    }
    i = valueEnd;
    if (i === header.length) return from < 0 ? undefined : header.slice(from, to);
    i = spacesEnd(header, i);
    if (header.charCodeAt(i) !== 0x2c /* , */) return undefined;
    i = spacesEnd(header, i + 1);
  }
}

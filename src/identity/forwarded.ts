/**
 * @module Reads the `for=` nodes of an RFC 7239 `Forwarded` header (`for=192.0.2.60;proto=http,
 * for="[2001:db8::1]:4711"`), in order, for the trusted-proxy walk of the client IP.
 */

/** A header longer than this is not a proxy chain; it is parsed no further (the walk then stops). */
const MAX_HEADER_LEN = 4096;

const enum C {
  COMMA = 0x2c,
  SEMI = 0x3b,
  EQ = 0x3d,
  QUOTE = 0x22,
  BACKSLASH = 0x5c,
  SPACE = 0x20,
  TAB = 0x09,
}

/** RFC 7230 tchar: the characters of a token (parameter names and unquoted values). */
function isTchar(c: number): boolean {
  return (
    (c >= 0x30 && c <= 0x39) || // 0-9
    (c >= 0x41 && c <= 0x5a) || // A-Z
    (c >= 0x61 && c <= 0x7a) || // a-z
    c === 0x21 ||
    (c >= 0x23 && c <= 0x27) ||
    c === 0x2a ||
    c === 0x2b ||
    c === 0x2d ||
    c === 0x2e ||
    c === 0x5e ||
    c === 0x5f ||
    c === 0x60 ||
    c === 0x7c ||
    c === 0x7e ||
    // ':', '[' and ']' are not tchar, but proxies write `for=1.2.3.4:80` and `for=[::1]` unquoted;
    // they are accepted in values so such a node is read, not treated as garbage.
    c === 0x3a ||
    c === 0x5b ||
    c === 0x5d
  );
}

/**
 * The `for` value of each forwarded-element, left to right, unquoted (`"[2001:db8::1]:80"` →
 * `[2001:db8::1]:80`), with `null` for an element that is malformed or names `for` twice: the walk
 * stops there, as it does on X-Forwarded-For garbage. Elements without `for` (e.g. only `proto=`)
 * are skipped, as Rack skips them. Returns `null` when no element has a `for` parameter and none is
 * malformed: the header says nothing about the client, and X-Forwarded-For or the peer decides.
 *
 * Values are returned as written (`unknown`, `_hidden`, `1.2.3.4:_port` included); the walk's
 * address parser refuses them, which ends the walk at the trusted hop that passed them on.
 */
export function forwardedForNodes(header: string): (string | null)[] | null {
  if (header.length > MAX_HEADER_LEN) return [null];
  const out: (string | null)[] = [];
  let malformed = false;
  const n = header.length;
  let i = 0;
  // One forwarded-element per pass.
  while (i <= n) {
    let forValue: string | null | undefined; // undefined: no `for` yet; null: element is garbage
    let bad = false;
    // pairs separated by ';'
    for (;;) {
      while (i < n && (header.charCodeAt(i) === C.SPACE || header.charCodeAt(i) === C.TAB)) i++;
      const nameStart = i;
      while (i < n && isTchar(header.charCodeAt(i)) && header.charCodeAt(i) !== C.EQ) i++;
      const name = header.slice(nameStart, i);
      if (name.length === 0) {
        // An empty element (`a, , b`) is allowed by list syntax; anything else here is garbage.
        if (i < n && header.charCodeAt(i) !== C.COMMA) bad = true;
        break;
      }
      if (i >= n || header.charCodeAt(i) !== C.EQ) {
        bad = true;
        break;
      }
      i++; // '='
      const read = readValue(header, i);
      if (read === null) {
        // An unterminated quote swallows the rest of the header: nothing after it can be read.
        out.push(null);
        return out;
      }
      const value = read.value;
      i = read.end;
      if (name.length === 3 && name.toLowerCase() === 'for') {
        if (forValue !== undefined) bad = true;
        forValue = value;
      }
      while (i < n && (header.charCodeAt(i) === C.SPACE || header.charCodeAt(i) === C.TAB)) i++;
      if (i < n && header.charCodeAt(i) === C.SEMI) {
        i++;
        continue;
      }
      if (i < n && header.charCodeAt(i) !== C.COMMA) bad = true;
      break;
    }
    if (bad) {
      malformed = true;
      out.push(null);
      i = nextComma(header, i);
    } else if (forValue !== undefined) {
      out.push(forValue);
    }
    if (i >= n) break;
    i++; // ','
  }
  return out.length === 0 && !malformed ? null : out;
}

/** A parameter's value at `i`, a quoted-string or a token, and the index after it; null when a quote never closes. */
function readValue(header: string, i: number): { value: string; end: number } | null {
  if (i < header.length && header.charCodeAt(i) === C.QUOTE) return readQuoted(header, i + 1);
  let end = i;
  while (end < header.length && isTchar(header.charCodeAt(end))) end++;
  return { value: header.slice(i, end), end };
}

/** A quoted-string's value from just after its opening quote, and the index after its closing one; null when it never closes. */
function readQuoted(header: string, from: number): { value: string; end: number } | null {
  const n = header.length;
  let v = '';
  for (let i = from; i < n;) {
    const c = header.charCodeAt(i);
    if (c === C.BACKSLASH && i + 1 < n) {
      v += header[i + 1];
      i += 2;
    } else if (c === C.QUOTE) {
      return { value: v, end: i + 1 };
    } else {
      v += header[i];
      i++;
    }
  }
  return null;
}

/** Resynchronises after a malformed element: the index of the next comma outside quotes (or the end). */
function nextComma(header: string, from: number): number {
  const n = header.length;
  let quoted = false;
  let i = from;
  while (i < n) {
    const c = header.charCodeAt(i);
    if (c === C.BACKSLASH && quoted) i++;
    else if (c === C.QUOTE) quoted = !quoted;
    else if (c === C.COMMA && !quoted) break;
    i++;
  }
  return i;
}

/** `Forwarded`'s `for=` nodes as forwardedForNodes reads them, parsed once per request by whoever holds it (the request's view). */
export interface ParsedForwarded {
  forwardedFor(): (string | null)[] | null;
}

/**
 * The `for=` addresses a trusted walk may use, as an X-Forwarded-For list (left to right): the nodes
 * right of the last one that is not an address (`unknown`, `_hidden`, garbage), brackets and ports
 * removed. An upstream that walks X-Forwarded-For (Rails' RemoteIp) then stops where the gateway did.
 * `bare` reduces one node to an address or null (identity/ip.ts `bareForwardedAddress` plus a parse).
 */
export function forwardedForList(header: string | ParsedForwarded, bare: (node: string) => string | null): string[] {
  const nodes = typeof header === 'string' ? forwardedForNodes(header) : header.forwardedFor();
  if (nodes === null) return [];
  const out: string[] = [];
  for (let i = nodes.length - 1; i >= 0; i--) {
    const node = nodes[i]!;
    const addr = node === null ? null : bare(node);
    if (addr === null || addr === '') break;
    out.push(addr);
  }
  return out.reverse();
}

/**
 * A trusted proxy's X-Forwarded-For with the peer appended, made as one flat string: a concatenation
 * (a cons string) made undici's header check flatten it through the runtime, ~1.5k instructions per
 * forwarded request.
 */
export function extendedChain(xff: string | readonly string[], peerAddr: string): string {
  return typeof xff === 'string' ? [xff, peerAddr].join(', ') : [...xff, peerAddr].join(', ');
}

/**
 * @module The bucket key tails the memory table packs: a canonical `{ip:a.b.c.d}` read as four bytes, and
 * a `{<kind>:<64 hex>}` digest tail found and read, each by char codes without slicing a string.
 */

/** Hex digits of a SHA-256 digest. */
const DIGEST_HEX = 64;

/** `{ip:a.b.c.d}` in canonical dotted-quad form (no leading zeros, each ≤ 255) → out[4..7]. */
export function packIpv4(key: string, brace: number, out: Uint8Array): boolean {
  const end = key.length - 1;
  if (
    end - brace < 11 ||
    key.charCodeAt(end) !== 0x7d /* } */ ||
    key.charCodeAt(brace + 1) !== 0x69 /* i */ ||
    key.charCodeAt(brace + 2) !== 0x70 /* p */ ||
    key.charCodeAt(brace + 3) !== 0x3a /* : */
  ) {
    return false;
  }
  let i = brace + 4;
  for (let part = 0; part < 4; part++) {
    const from = i;
    let v = 0;
    while (i < end) {
      const c = key.charCodeAt(i);
      if (c < 0x30 || c > 0x39) break;
      v = v * 10 + (c - 0x30);
      i++;
    }
    const digits = i - from;
    if (digits === 0 || digits > 3 || v > 255 || (digits > 1 && key.charCodeAt(from) === 0x30)) return false;
    out[4 + part] = v;
    if (part < 3) {
      if (key.charCodeAt(i) !== 0x2e /* . */) return false;
      i++;
    }
  }
  return i === end;
}

/** A lowercase hex digit's value (the caller has checked it is one). */
export function hexValue(c: number): number {
  return c <= 0x39 ? c - 0x30 : c - 0x57;
}

/**
 * Where the digest starts in a `{<kind>:<64 lowercase hex>}` tail (kind: 1–12 of `a-z` and `:`, e.g.
 * `ck`, `acct:h`), or -1 when the tail is not of that form.
 */
export function digestStart(key: string, brace: number): number {
  const end = key.length - 1;
  const hexAt = end - DIGEST_HEX;
  if (
    key.charCodeAt(end) !== 0x7d /* } */ ||
    hexAt < brace + 3 ||
    hexAt - brace > 14 ||
    key.charCodeAt(hexAt - 1) !== 0x3a /* : */
  )
    return -1;
  for (let i = brace + 1; i < hexAt; i++) {
    const c = key.charCodeAt(i);
    if ((c < 0x61 || c > 0x7a) && c !== 0x3a) return -1;
  }
  for (let i = hexAt; i < end; i++) {
    const c = key.charCodeAt(i);
    if ((c < 0x30 || c > 0x39) && (c < 0x61 || c > 0x66)) return -1;
  }
  return hexAt;
}

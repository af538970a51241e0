/**
 * @module The server an HTTP Signature claims to come from (`per: signature:domain`): the lower-cased
 * host of the `keyId`, read from RFC 9421's `Signature-Input:` (`keyid="…"`) or draft-cavage's
 * `Signature:` (`keyId="…"`, parsed as Mastodon parses it: signature-params.ts), as Mastodon and other
 * ActivityPub servers sign their deliveries. Nothing
 * is verified (the gateway holds no key): the domain is a claim, so docs/federation.md pairs it with
 * the IP. A hostile header costs one linear scan of at most MAX_SIGNATURE_HEADER characters.
 */

import { cavageParam } from './signature-params.js';

/** Longer than any real signature header (an RSA-4096 signature in base64 is 684 characters). */
export const MAX_SIGNATURE_HEADER = 8192;
/** A keyId longer than this names no server worth a bucket. */
const MAX_KEY_ID = 2048;
/** A DNS name (RFC 1035: 253 characters), as the URL parser leaves it: ASCII, lower-case, punycode. */
const DOMAIN = /^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/;
const IPV6_LITERAL = /^\[[0-9a-f:.]+\]$/;

/**
 * The value of the first parameter `name` (lower-case) that stands outside quoted strings right after
 * `;`, `,` or the start (each optionally followed by spaces), as a quoted string; undefined when none.
 * RFC 9421's `Signature-Input` holds `;`-parameters of a dictionary member whose inner list holds
 * quoted strings: one pass, no backtracking. (The cavage `Signature:` header is read by cavageParam.)
 */
export function quotedParam(header: string, name: string): string | undefined {
  let atStart = true;
  for (let i = 0; i < header.length; i++) {
    const c = header.charCodeAt(i);
    if (c === 0x22 /* " */) {
      i = quotedEnd(header, i);
      if (i < 0) return undefined;
      atStart = false;
    } else if (c === 0x3b /* ; */ || c === 0x2c /* , */) atStart = true;
    else if (c === 0x20 || c === 0x09) continue;
    else if (atStart && header.length - i > name.length + 1 && sameName(header, i, name)) {
      const open = i + name.length + 1;
      if (header.charCodeAt(open) !== 0x22) return undefined;
      const close = quotedEnd(header, open);
      return close < 0 ? undefined : header.slice(open + 1, close).replace(/\\(.)/g, '$1');
    } else atStart = false;
  }
  return undefined;
}

/** The index of the `"` closing the quoted string opened at `open`, or -1 when it is not closed. */
function quotedEnd(s: string, open: number): number {
  for (let j = open + 1; j < s.length; j++) {
    const c = s.charCodeAt(j);
    if (c === 0x5c /* \ */) j++;
    else if (c === 0x22) return j;
  }
  return -1;
}

/** Whether `s` has `name=` at `at`, the name compared case-insensitively (cavage writes keyId, RFC 9421 keyid). */
function sameName(s: string, at: number, name: string): boolean {
  return s.charCodeAt(at + name.length) === 0x3d /* = */ && s.slice(at, at + name.length).toLowerCase() === name;
}

/**
 * The lower-cased host of a keyId: a URL (`https://host/users/x#main-key`), or `acct:user@host` (older
 * senders; Mastodon resolves it by WebFinger); undefined when it names none.
 */
export function keyIdDomain(keyId: string): string | undefined {
  if (keyId.length === 0 || keyId.length > MAX_KEY_ID) return undefined;
  // Mastodon keeps a quoted value's backslashes, and a URL parser reads `\` as `/` (`https://a.example\@b.example/`
  // is host a.example to it): such a keyId names no server the gateway and Mastodon agree on.
  if (keyId.includes('\\')) return undefined;
  let url: URL;
  try {
    url = new URL(keyId.startsWith('acct:') ? `https://${keyId.slice(keyId.lastIndexOf('@') + 1)}/` : keyId);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return undefined;
  // An acct: keyId is a user at a host and nothing more.
  if (keyId.startsWith('acct:') && (!keyId.includes('@') || url.href !== `https://${url.host}/`)) return undefined;
  // `host.` and `host` are one server; the URL parser already lower-cased and punycoded the name.
  const host = url.hostname.endsWith('.') ? url.hostname.slice(0, -1) : url.hostname;
  if (host.length === 0 || host.length > 253) return undefined;
  return DOMAIN.test(host) || IPV6_LITERAL.test(host) ? host : undefined;
}

/**
 * The domain a request's signature headers claim (RFC 9421 first, then draft-cavage), or undefined. A
 * `Signature:` header that Mastodon cannot parse, or whose last `keyId` names no server, claims none.
 */
export function signatureDomain(signatureInput: string | undefined, signature: string | undefined): string | undefined {
  if (signatureInput !== undefined && signatureInput.length <= MAX_SIGNATURE_HEADER) {
    const keyId = quotedParam(signatureInput, 'keyid');
    if (keyId !== undefined) return keyIdDomain(keyId);
  }
  if (signature === undefined || signature.length > MAX_SIGNATURE_HEADER) return undefined;
  const keyId = cavageParam(signature, 'keyId');
  return keyId === undefined ? undefined : keyIdDomain(keyId);
}

/** The last pair of headers read and its domain: every `signature:` rule of a request reads the same headers. */
let lastInput: string | undefined;
let lastSignature: string | undefined;
let lastDomain: string | undefined;

/** The request's signature domain (keys/kinds.ts KeyFacts), parsed once per distinct pair of headers. */
export function requestSignatureDomain(facts: { header(name: string): string | undefined }): string | undefined {
  const input = facts.header('signature-input');
  const signature = facts.header('signature');
  if (input === undefined && signature === undefined) return undefined;
  if (input !== lastInput || signature !== lastSignature) {
    lastDomain = signatureDomain(input, signature);
    lastInput = input;
    lastSignature = signature;
  }
  return lastDomain;
}

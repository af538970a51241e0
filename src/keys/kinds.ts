/**
 * @module The one table of key kinds (`per: ip | account | global | token | header:NAME | param:NAME |
 * cookie:NAME | jwt:CLAIM | signature:domain`): for each, its syntax, its bucket tag, what it needs from the request, how it
 * reads its value, how it digests a value an operator types, and how it shows a key. The schema, the
 * compiled rules, the bucket keys, the request path, the admin API, `explain` and the triage sketch all
 * derive from this table, so a kind is added here (plus its tests) and nowhere else.
 */
// The identity modules themselves, not identity/index.js: `check` loads this table and must not load
// the introspection client (undici) with it.
import { tokenDigest } from '../identity/account.js';
import { accountKeyNamedBy } from '../identity/account-key.js';
import { ipBucketKey } from '../identity/ip.js';
import { normalizeParamKey } from '../identity/key-normalize.js';
import { parseKey } from '../rails/rack-params.js';
import { tokenClaim } from './jwt.js';
import { keyIdDomain, requestSignatureDomain } from './signature.js';
import { NEED } from './needs.js';
import type { KeyKind, KindArg, KindName } from './kind-types.js';

export type { KeyFacts, KeyKind, KindArg, KindName, TypedContext } from './kind-types.js';

/** An RFC 7230 token: header names, cookie names (RFC 6265). */
const TOKEN_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** A JWT claim name: visible ASCII (namespaced claims such as `https://example.com/tenant` included). */
const CLAIM_NAME = /^[\x21-\x7e]{1,128}$/;
const SHA256_HEX = /^[0-9a-f]{64}$/i;
/** The argument of every kind without a name. */
export const NO_NAME: KindArg = Object.freeze({ name: '', path: null });

/**
 * A parameter name's bracket path (`user[email]` → ['user', 'email']), or undefined when the name is
 * not one value in Rack notation: empty, an array step `[]`, empty brackets, or a bracket Rack would
 * read as part of a literal name (unbalanced), which an operator surely did not mean.
 */
export function paramPath(name: string): string[] | undefined {
  const path = parseKey(name);
  if (path === undefined || path.includes('')) return undefined;
  if (path.length === 1 && /[[\]]/.test(name.slice(1))) return undefined;
  return path;
}

/** A kind keyed on the digest of a value (tokens are secrets, e-mail addresses personal data). */
function digested(value: string | undefined, normalize: (v: string) => string): string | null {
  return value === undefined ? null : tokenDigest(normalize(value));
}

function typedDigest(text: string, normalize: (v: string) => string): readonly string[] {
  const v = normalize(text);
  return v.trim() === '' ? [] : [tokenDigest(v)];
}

const trim = (v: string): string => v.trim();
const shortDigest = (value: string): string => `digest ${value.slice(0, 12)}…`;

/** The account key's forms (identity/account-key.ts): `a:` an id, `h:` a header value, `t:` a token digest. */
function displayAccount(value: string): string {
  return value.startsWith('t:') ? `token ${value.slice(2, 18)}` : `account ${value.slice(2)}`;
}

/** The NAME as written: no path (cookie names and claim names are case-sensitive). */
const asWritten = (name: string): KindArg => Object.freeze({ name, path: null });

function named(
  kind: string,
  check: (name: string) => boolean,
  hint: string,
  arg: (name: string) => KindArg = asWritten,
): KeyKind['compileName'] {
  return (name, per) =>
    check(name) ? arg(name) : `invalid ${kind} name ${JSON.stringify(name)} in per ${JSON.stringify(per)}${hint}`;
}

export const KINDS = {
  ip: {
    syntax: 'ip',
    meaning: "The client's IP address (IPv6: its network of `clients.ipv6Prefix` bits).",
    compileName: null,
    tag: 'ip',
    needs: 0,
    wantsParam: () => null,
    operatorNames: 'client-ip',
    overrideKeys: false,
    read: (_arg, facts) => facts.ipKey,
    typed: (_arg, text, ctx) => {
      const key = ipBucketKey(text.trim(), ctx.ipv6Prefix);
      return key === null ? [] : [key];
    },
    typedHint: () => 'an IP address',
    display: (value) => value,
    what: () => 'IP',
    shown: (_arg, _facts, value) => `ip ${value}`,
  },
  account: {
    syntax: 'account',
    meaning: "The request's account (`clients.account`); a request without one skips the rule.",
    compileName: null,
    tag: 'acct',
    needs: NEED.account,
    wantsParam: () => null,
    operatorNames: 'account',
    overrideKeys: false,
    read: (_arg, facts) => facts.accountKey,
    typed: (_arg, text, ctx) => {
      const key = accountKeyNamedBy(ctx.accountFrom, text.trim());
      return key === null ? [] : [key];
    },
    typedHint: (ctx) =>
      ctx.accountFrom === 'token'
        ? "the token's SHA-256 digest (hex)"
        : ctx.accountFrom === 'header'
          ? 'the account header value'
          : 'the account id',
    display: displayAccount,
    what: () => 'account',
    shown: (_arg, _facts, value) => displayAccount(value),
  },
  global: {
    syntax: 'global',
    meaning: 'One bucket for everyone.',
    compileName: null,
    tag: 'global',
    needs: 0,
    wantsParam: () => null,
    operatorNames: 'nothing',
    overrideKeys: false,
    read: () => '',
    typed: () => [''],
    typedHint: () => 'nothing (one bucket for everyone)',
    display: () => 'global',
    what: () => 'bucket',
    shown: () => 'one bucket for everyone',
  },
  token: {
    syntax: 'token',
    meaning: 'The bearer token, as its SHA-256 digest: one bucket per token, however it was sent.',
    compileName: null,
    tag: 'tok',
    needs: NEED.token,
    wantsParam: () => null,
    operatorNames: 'value',
    overrideKeys: true,
    read: (_arg, facts) => facts.tokenDigest(),
    // Operators name tokens by their digest (as everywhere else); a raw token works too.
    typed: (_arg, text) => {
      const t = text.trim();
      if (t === '') return [];
      return SHA256_HEX.test(t) ? [t.toLowerCase(), tokenDigest(t)] : [tokenDigest(t)];
    },
    typedHint: () => "the token's SHA-256 digest",
    display: (value) => `token ${value.slice(0, 16)}`,
    what: () => 'token',
    shown: (_arg, _facts, value) => `token, ${shortDigest(value)}`,
  },
  header: {
    syntax: 'header:NAME',
    meaning: "A header's value, trimmed (case kept: API keys are case-sensitive), digested.",
    compileName: named(
      'header',
      (n) => TOKEN_NAME.test(n),
      '',
      (n) => Object.freeze({ name: n.toLowerCase(), path: null }),
    ),
    tag: 'hdr',
    needs: NEED.header,
    wantsParam: () => null,
    operatorNames: 'value',
    overrideKeys: true,
    read: (arg, facts) => digested(facts.header(arg.name), trim),
    typed: (_arg, text) => typedDigest(text, trim),
    typedHint: () => 'the value',
    display: (value) => `header ${value.slice(0, 16)}`,
    what: (arg) => `header ${arg.name}`,
    shown: (arg, facts, value) =>
      `header ${arg.name} ${JSON.stringify(trim(facts.header(arg.name) ?? ''))}, ${shortDigest(value)}`,
  },
  param: {
    syntax: 'param:NAME',
    meaning:
      'A request parameter in Rack bracket notation (query, form, multipart or JSON body), stripped and downcased as Rack::Attack does, digested.',
    compileName: named(
      'parameter',
      (n) => paramPath(n) !== undefined,
      ' (Rack bracket notation naming one value, e.g. user[email]; no [] and no unclosed bracket)',
      (n) => Object.freeze({ name: n, path: Object.freeze(paramPath(n)!) }),
    ),
    tag: 'prm',
    needs: NEED.params | NEED.query,
    wantsParam: (arg) => arg.name,
    operatorNames: 'value',
    overrideKeys: true,
    read: (arg, facts) => digested(facts.param(arg.name, arg.path!), normalizeParamKey),
    typed: (_arg, text) => typedDigest(text, normalizeParamKey),
    typedHint: () => 'the value',
    display: (value) => `param ${value.slice(0, 16)}`,
    what: (arg) => `parameter ${arg.name}`,
    shown: (arg, facts, value) =>
      `parameter ${arg.name} ${JSON.stringify(normalizeParamKey(facts.param(arg.name, arg.path!) ?? ''))}, ${shortDigest(value)}`,
  },
  cookie: {
    syntax: 'cookie:NAME',
    meaning: "A cookie's value (case-sensitive name), digested; a cookie never makes a request authenticated.",
    compileName: named('cookie', (n) => TOKEN_NAME.test(n), ' (an RFC 6265 token, e.g. _mastodon_session)'),
    tag: 'ck',
    needs: NEED.cookie,
    wantsParam: () => null,
    operatorNames: 'value',
    overrideKeys: true,
    read: (arg, facts) => digested(facts.cookie(arg.name), trim),
    typed: (_arg, text) => typedDigest(text, trim),
    typedHint: () => 'the value',
    display: (value) => `cookie ${value.slice(0, 16)}`,
    what: (arg) => `cookie ${arg.name}`,
    // A session cookie is a credential: never shown, only its digest.
    shown: (arg, _facts, value) => `cookie ${arg.name}, ${shortDigest(value)}`,
  },
  jwt: {
    syntax: 'jwt:CLAIM',
    meaning:
      'A claim (string or number) of the bearer token read as a JWT, unverified: a key the client chooses unless the upstream verifies the token; digested.',
    compileName: named('claim', (n) => CLAIM_NAME.test(n), ' (a JWT claim name, e.g. sub or tenant_id)'),
    tag: 'jwt',
    needs: NEED.token,
    wantsParam: () => null,
    operatorNames: 'value',
    overrideKeys: true,
    read: (arg, facts) => digested(tokenClaim(facts, arg.name), trim),
    typed: (_arg, text) => typedDigest(text, trim),
    typedHint: () => 'the claim value',
    display: (value) => `jwt ${value.slice(0, 16)}`,
    what: (arg) => `JWT claim ${arg.name}`,
    shown: (arg, facts, value) =>
      `JWT claim ${arg.name} ${JSON.stringify(trim(tokenClaim(facts, arg.name) ?? ''))}, ${shortDigest(value)}`,
  },
  signature: {
    syntax: 'signature:domain',
    meaning:
      "The lower-cased host of the HTTP Signature's keyId (RFC 9421 Signature-Input, or draft-cavage Signature parsed as Mastodon parses it: exact names, the last keyId wins), unverified: combine it with ip (docs/federation.md).",
    compileName: named(
      'signature part',
      (n) => n === 'domain',
      ' (signature:domain is the one form)',
      () => Object.freeze({ name: 'domain', path: null }),
    ),
    tag: 'sig',
    needs: NEED.header,
    wantsParam: () => null,
    operatorNames: 'value',
    overrideKeys: true,
    // A domain is neither a secret nor personal data: kept as it is, so operators read it everywhere.
    read: (_arg, facts) => requestSignatureDomain(facts) ?? null,
    typed: (_arg, text) => {
      const t = text.trim();
      const domain = t === '' ? undefined : keyIdDomain(t.includes('://') ? t : `https://${t}/`);
      return domain === undefined ? [] : [domain];
    },
    typedHint: () => 'the signing server’s domain (e.g. mastodon.example)',
    display: (value) => `signature ${value}`,
    what: () => 'HTTP signature keyId',
    shown: (_arg, _facts, value) => `signature domain ${value} (claimed, unverified)`,
  },
} as const satisfies Record<KindName, KeyKind>;

/** The kinds in table order (the order the schema's hint and the docs list them). */
export const KIND_NAMES = Object.freeze(Object.keys(KINDS) as KindName[]);

/** The kind a bucket tag names (`acct` → account), for showing a key from the key alone. */
export const KIND_BY_TAG: ReadonlyMap<string, KeyKind> = new Map(KIND_NAMES.map((k) => [KINDS[k].tag, KINDS[k]]));

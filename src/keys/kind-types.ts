/** @module The shape of a key kind: what `per:` names, what a key reads from a request, and what each kind must provide. */

export type KindName = 'ip' | 'account' | 'global' | 'token' | 'header' | 'param' | 'cookie' | 'jwt' | 'signature';

/** What a key reads from one request, each fact read at most once (the pipeline's RequestView provides it). */
export interface KeyFacts {
  /** The client's bucket key: its IPv4 address, or its IPv6 network (`clients.ipv6Prefix`). */
  readonly ipKey: string;
  /** The account key (`a:42`, `h:…`, `t:<digest>`), or null: the request has none (or it is not known yet). */
  readonly accountKey: string | null;
  /** The token Doorkeeper reads, wherever it was sent; null without one. Kinds key on its digest or its claims, never on it. */
  rawToken(): string | null;
  /** The SHA-256 hex of that token; null without one. */
  tokenDigest(): string | null;
  /** A header's first value, trimmed; undefined when absent or blank. `name` is lower-case. */
  header(name: string): string | undefined;
  /** A cookie's value as Rack reads it; undefined when absent or blank. */
  cookie(name: string): string | undefined;
  /** A parameter's one value (query first, then the body); undefined when absent, blank or not one value. */
  param(name: string, path: readonly string[]): string | undefined;
}

/** The NAME after the colon, compiled: a header's lower-cased, a parameter's bracket path. */
export interface KindArg {
  /** '' for kinds without a name. */
  readonly name: string;
  /** `param:` → the bracket path (`user[email]` → user, email); else null. */
  readonly path: readonly string[] | null;
}

/** What an operator's value means under the config in force (the admin API, `overrides.keys`). */
export interface TypedContext {
  readonly ipv6Prefix: number;
  readonly accountFrom: 'token' | 'header' | 'introspect';
}

export interface KeyKind {
  /** How `per:` writes it: `ip`, or `header:NAME` (then compileName reads NAME). */
  readonly syntax: string;
  /** One sentence for the schema's description and docs/limit-table.md. */
  readonly meaning: string;
  /** Checks and compiles the NAME after the colon (a string is the error); null: the kind takes no name. */
  readonly compileName: ((name: string, per: string) => KindArg | string) | null;
  /** The hash tag's kind: `{ip:…}`. Stable: bucket keys in Redis and ban keys are spelled with it. */
  readonly tag: string;
  /** What it needs from the request (NEED flags). */
  readonly needs: number;
  /** The request parameter it reads (the body peek looks for it), or null. */
  wantsParam(arg: KindArg): string | null;
  /** What an operator's key names: the client's IP, an account, a key value, or nothing (one bucket). */
  readonly operatorNames: 'client-ip' | 'account' | 'value' | 'nothing';
  /** Whether `overrides[].keys` may name values of this kind (else ips and accounts only). */
  readonly overrideKeys: boolean;
  /** The key value of this request ('' for the one global bucket), or null: it has none and the rule is skipped. */
  read(arg: KindArg, facts: KeyFacts): string | null;
  /** The key values an operator's text stands for, the first as the admin API shows it; [] when it names none. */
  typed(arg: KindArg, text: string, ctx: TypedContext): readonly string[];
  /** What the admin API asks for when `typed` finds nothing. */
  typedHint(ctx: TypedContext): string;
  /** A key value as an operator reads it (`/admin/limited`, `/admin/buckets`, logs): never a secret. */
  display(value: string): string;
  /** What the key is, for `explain` ("header x-app-id"): "the request has no …". */
  what(arg: KindArg): string;
  /** The key of this request as `explain` prints it (normalized values shown where not a secret). */
  shown(arg: KindArg, facts: KeyFacts, value: string): string;
}

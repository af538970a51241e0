/**
 * @module The KeyFacts a test hands to a rule's key (keys/kinds.ts): a request with no client, account,
 * token, header, cookie or parameter unless the test says so. A new fact the kinds read is one edit here,
 * not one per test.
 */
import type { KeyFacts } from '../../src/keys/index.js';
import { tokenDigest } from '../../src/identity/index.js';

export interface KeyFactsGiven {
  readonly ipKey?: string;
  readonly accountKey?: string | null;
  /** The token Doorkeeper reads; its digest follows from it. */
  readonly token?: string | null;
  /** Header values by lower-case name. */
  readonly headers?: Readonly<Record<string, string | undefined>>;
  readonly cookies?: Readonly<Record<string, string | undefined>>;
  /** Parameter values by name (the bracket path is ignored: name them as written, `user[email]`). */
  readonly params?: Readonly<Record<string, string | undefined>>;
}

/** KeyFacts from what a test gives; `override` replaces whole readers (a header read from a fixture, a counter). */
export function keyFacts(given: KeyFactsGiven = {}, override: Partial<KeyFacts> = {}): KeyFacts {
  const token = given.token ?? null;
  return {
    ipKey: given.ipKey ?? '',
    accountKey: given.accountKey ?? null,
    rawToken: () => token,
    tokenDigest: () => (token === null ? null : tokenDigest(token)),
    header: (name) => given.headers?.[name],
    cookie: (name) => given.cookies?.[name],
    param: (name) => given.params?.[name],
    ...override,
  };
}

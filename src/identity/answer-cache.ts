/** @module What introspection answered, per token digest, for as long as each kind of answer is believed. */
import { BoundedMap } from './bounded-map.js';

/** A cached answer: the account key (null: the token is invalid, no account) and until when it holds. */
export interface CacheEntry {
  readonly key: string | null;
  readonly expiresAt: number;
}

/**
 * Valid and invalid answers in two bounded maps of `maxEntries` each. Security (issue 37): junk tokens,
 * whoever sends them, evict only each other, never a valid token's entry (its owner would pay a call).
 * Keyed by digest: no token is kept.
 */
export class AnswerCache {
  readonly #valid: BoundedMap<string, CacheEntry>;
  readonly #invalid: BoundedMap<string, CacheEntry>;

  constructor(
    maxEntries: number,
    private readonly now: () => number,
  ) {
    this.#valid = new BoundedMap(maxEntries);
    this.#invalid = new BoundedMap(maxEntries);
  }

  /** The unexpired answer for a digest (valid, else invalid), dropping an expired one. */
  get(digest: string): CacheEntry | undefined {
    return this.#fresh(this.#valid, digest) ?? this.#fresh(this.#invalid, digest);
  }

  set(digest: string, entry: CacheEntry): void {
    if (entry.key === null) this.#invalid.set(digest, entry);
    else this.#valid.set(digest, entry);
  }

  #fresh(map: BoundedMap<string, CacheEntry>, digest: string): CacheEntry | undefined {
    const hit = map.get(digest);
    if (hit === undefined || hit.expiresAt > this.now()) return hit;
    map.delete(digest);
    return undefined;
  }
}

/** @module A size-capped Map (oldest insertion evicted first) for per-request lookup caches. */

/**
 * A Map that never holds more than `max` entries. Keys arrive from the network (peer addresses,
 * X-Forwarded-For entries, token digests), so every cache on the request path must be bounded or a
 * flood of distinct values would grow memory without limit. Eviction is by insertion order, which a
 * Map keeps for free: cheaper than a true LRU and good enough for caches whose misses are cheap.
 */
export class BoundedMap<K, V> {
  readonly #map = new Map<K, V>();
  readonly #max: number;

  constructor(max: number) {
    if (!Number.isInteger(max) || max < 1) throw new Error(`cache size must be a positive integer, got ${max}`);
    this.#max = max;
  }

  get size(): number {
    return this.#map.size;
  }

  get(key: K): V | undefined {
    return this.#map.get(key);
  }

  /** Inserts or replaces; a replaced key moves to the young end so a refreshed entry is kept longest. */
  set(key: K, value: V): void {
    if (this.#map.has(key)) {
      this.#map.delete(key);
    } else if (this.#map.size >= this.#max) {
      const oldest = this.#map.keys().next();
      if (oldest.done !== true) this.#map.delete(oldest.value);
    }
    this.#map.set(key, value);
  }

  delete(key: K): void {
    this.#map.delete(key);
  }

  clear(): void {
    this.#map.clear();
  }
}

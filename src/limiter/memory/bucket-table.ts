/**
 * @module The memory store's table: bucket key → four doubles, held in typed arrays outside the V8 heap.
 *
 * Why not a `Map<string, …>`: each distinct client then costs a heap string (~40 B), a Map entry (~20 B
 * plus the table's growth slack) and its slab slot, and V8 sizes the old generation as a multiple of the
 * live heap, so every live heap byte costs two to three bytes of RSS in a busy gateway. Here a bucket is
 * one row of dense typed arrays (state 32 B, hash 4 B, packed key 16 B) plus 4 B of open-addressing
 * index at most 3/4 full, and the slack of growing by half: ~60–80 B, none of it on the V8 heap.
 *
 * Keys are packed, never changed: the part before the first `{` (the rule's prefix, e.g. `ip-access:`)
 * is interned as a 16-bit number, a canonical `{ip:a.b.c.d}` tail becomes four bytes, any other ASCII
 * tail up to 12 characters is copied. A digest tail (`{ck:<64 hex>}`, `{hdr:…}`, `{tok:…}`, `{prm:…}`,
 * `{acct:h:…}`: values the client chooses) interns its prefix with the kind (`sid:{ck:`) and keeps the
 * digest's first 96 bits. Keys that do not pack (IPv6 networks, long account keys, keys with no `{`) go
 * to a small string map beside the table and cost what they did before. A tag byte tells the forms
 * apart; the packing is injective but for digests, where two values share a row only when their
 * SHA-256 digests agree on 96 bits: such clients would be counted together (never more than a limit
 * admits), and finding a value that shares a given client's row is a 2^96 search.
 *
 * Rows stay dense: removing a row moves the last row into its place, so the arrays can shrink when the
 * clients of a busier period have expired (at a quarter full, to half the capacity).
 */
import { digestStart, hexValue, packIpv4 } from './key-tail.js';

/** Doubles per row: state a, b, c, then expireAt (epoch ms after which the bucket carries nothing). */
export const ROW = 4;
/** Bytes of packed key per row: [length, prefix id lo, prefix id hi, tag, payload ≤ 12]. */
const KEY = 16;
const LONG = 0xff; // length byte of a row whose key is in `longKeys`
const TAG_IPV4 = 1;
const TAG_ASCII = 2;
const TAG_DIGEST = 3;
/** Hex digits of a SHA-256 digest a row keeps (96 bits: the payload's 12 bytes). */
const KEPT_HEX = 24;
const MIN_ROWS = 1024;
const MAX_PREFIXES = 0xffff;
/** Slots of the recent-prefix cache (a power of two): a table has a few rules, each with a prefix or two. */
const RECENT_PREFIXES = 16;
/** Slots of the recent-key cache (a power of two): a client's request has a few buckets. */
const RECENT_KEYS = 16;

export class BucketTable {
  /** Four doubles per row (see ROW); read and written by the store. */
  state: Float64Array;
  private hashes: Uint32Array;
  private keys: Uint8Array;
  /** Open addressing, linear probing: row + 1, 0 = empty; a power of two, at most 3/4 full. */
  private index: Int32Array;
  private mask: number;
  private rows = 0;
  private capacity: number;
  private readonly prefixes = new Map<string, number>();
  /**
   * Prefixes found lately and their ids, in slots by length and last characters: a request's keys find
   * their rule's prefix by a compare, without slicing a fresh string that the Map would hash (ids never change).
   */
  private readonly recentPrefixes: (string | null)[] = new Array<string | null>(RECENT_PREFIXES).fill(null);
  private readonly recentIds = new Uint16Array(RECENT_PREFIXES);
  /** Keys found lately and their rows, in slots by length and first character; emptied whenever a row moves. */
  private readonly recentKeys: (string | null)[] = new Array<string | null>(RECENT_KEYS).fill(null);
  private readonly recentRows = new Int32Array(RECENT_KEYS);
  private readonly longKeys = new Map<number, string>();
  private readonly scratch = new Uint8Array(KEY);
  /**
   * A random start for the hash: a client who can choose keys (account header values) must not be able
   * to precompute keys that all land in one probe run, which would make every lookup a long scan.
   */
  private readonly seed = (Math.random() * 0x100000000) >>> 0;
  /** Length byte of the key last packed by `pack` (LONG when it did not pack), and its hash. */
  private packed = 0;
  private packedHash = 0;

  constructor() {
    this.capacity = MIN_ROWS;
    this.state = new Float64Array(MIN_ROWS * ROW);
    this.hashes = new Uint32Array(MIN_ROWS);
    this.keys = new Uint8Array(MIN_ROWS * KEY);
    this.index = new Int32Array(MIN_ROWS * 2);
    this.mask = MIN_ROWS * 2 - 1;
  }

  get size(): number {
    return this.rows;
  }

  /** The row of `key`, or -1. */
  find(key: string): number {
    const slot = recentSlot(key);
    // A key looked up lately (the same client again: its bucket spec, key string included, is reused).
    if (this.recentKeys[slot] === key) return this.recentRows[slot]!;
    const h = this.pack(key);
    const index = this.index;
    for (let i = h & this.mask; ; i = (i + 1) & this.mask) {
      const r = index[i]! - 1;
      if (r < 0) return -1;
      if (this.hashes[r] === h && this.sameKey(r, key)) {
        this.recentKeys[slot] = key;
        this.recentRows[slot] = r;
        return r;
      }
    }
  }

  /** The row of `key`, added (state zeroed) when absent. */
  insert(key: string): number {
    const found = this.find(key); // on a miss, leaves the key packed in `scratch` / `packed`
    if (found >= 0) return found;
    // Rows grow by half: less slack than doubling, and they are 52 of a bucket's ~60 bytes.
    if (this.rows === this.capacity) this.resize(Math.ceil(this.capacity * 1.5));
    const h = this.packedHash;
    const r = this.rows++;
    this.hashes[r] = h;
    const at = r * KEY;
    if (this.packed === LONG) {
      this.keys[at] = LONG;
      this.longKeys.set(r, key);
    } else {
      this.keys.set(this.scratch.subarray(0, this.packed + 1), at);
    }
    this.state.fill(0, r * ROW, r * ROW + ROW);
    this.place(r, h);
    return r;
  }

  /** Removes row `r`; the last row moves into its place (so a caller walking rows must look at `r` again). */
  remove(r: number): void {
    this.recentKeys.fill(null); // rows move: what was found lately is looked up again
    this.unplace(r);
    const last = --this.rows;
    if (this.keys[r * KEY] === LONG) this.longKeys.delete(r);
    if (r !== last) {
      // Point the index at the row's new place, then move its columns.
      const h = this.hashes[last]!;
      const index = this.index;
      for (let i = h & this.mask; ; i = (i + 1) & this.mask) {
        if (index[i] === last + 1) {
          index[i] = r + 1;
          break;
        }
      }
      this.hashes[r] = h;
      this.keys.copyWithin(r * KEY, last * KEY, last * KEY + KEY);
      this.state.copyWithin(r * ROW, last * ROW, last * ROW + ROW);
      if (this.keys[r * KEY] === LONG) {
        this.longKeys.set(r, this.longKeys.get(last)!);
        this.longKeys.delete(last);
      }
    }
    if (this.capacity > MIN_ROWS && this.rows < this.capacity / 4)
      this.resize(Math.max(MIN_ROWS, Math.ceil(this.capacity / 2)));
  }

  clear(): void {
    this.recentKeys.fill(null);
    this.rows = 0;
    this.longKeys.clear();
    this.resize(MIN_ROWS);
  }

  /** Packs `key` into `scratch` and returns its hash (seeded FNV-1a over the packed bytes, or the string's code units). */
  private pack(key: string): number {
    const n = this.packKey(key);
    this.packed = n;
    let h = this.seed ^ 0x811c9dc5;
    if (n === LONG) {
      for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
    } else {
      const s = this.scratch;
      s[0] = n;
      for (let i = 0; i <= n; i++) h = Math.imul(h ^ s[i]!, 0x01000193);
    }
    // murmur3's finalizer: the index uses the low bits, which FNV alone mixes poorly.
    h ^= h >>> 16;
    h = Math.imul(h, 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
    return (this.packedHash = h >>> 0);
  }

  /** Writes the packed form into `scratch`; returns its length byte (bytes after it), or LONG. */
  private packKey(key: string): number {
    const brace = key.indexOf('{');
    if (brace < 0) return LONG;
    const hexAt = digestStart(key, brace);
    const id = this.prefixId(key, hexAt < 0 ? brace : hexAt);
    if (id < 0) return LONG;
    const s = this.scratch;
    s[1] = id & 0xff;
    s[2] = id >>> 8;
    if (hexAt >= 0) {
      s[3] = TAG_DIGEST;
      for (let i = 0; i < KEPT_HEX / 2; i++)
        s[4 + i] = (hexValue(key.charCodeAt(hexAt + 2 * i)) << 4) | hexValue(key.charCodeAt(hexAt + 2 * i + 1));
      return 3 + KEPT_HEX / 2;
    }
    if (packIpv4(key, brace, this.scratch)) {
      s[3] = TAG_IPV4;
      return 7;
    }
    const n = key.length - brace;
    if (n > KEY - 4) return LONG;
    s[3] = TAG_ASCII;
    for (let i = 0; i < n; i++) {
      const c = key.charCodeAt(brace + i);
      if (c >= 0x80) return LONG;
      s[4 + i] = c;
    }
    return 3 + n;
  }

  /** The id of `key`'s first `end` characters, interned when new; -1 when no more prefixes fit. */
  private prefixId(key: string, end: number): number {
    const slot = (end ^ (key.charCodeAt(end - 1) << 1) ^ key.charCodeAt(end - 2)) & (RECENT_PREFIXES - 1);
    const recent = this.recentPrefixes[slot];
    if (recent !== null && recent !== undefined && recent.length === end && key.startsWith(recent))
      return this.recentIds[slot]!;
    const prefix = key.slice(0, end);
    let id = this.prefixes.get(prefix);
    if (id === undefined) {
      if (this.prefixes.size >= MAX_PREFIXES) return -1;
      id = this.prefixes.size;
      this.prefixes.set(prefix, id);
    }
    this.recentPrefixes[slot] = prefix;
    this.recentIds[slot] = id;
    return id;
  }

  private sameKey(r: number, key: string): boolean {
    const at = r * KEY;
    const keys = this.keys;
    const n = keys[at]!;
    if (n !== this.packed) return false;
    if (n === LONG) return this.longKeys.get(r) === key;
    const s = this.scratch;
    for (let i = 1; i <= n; i++) if (keys[at + i] !== s[i]) return false;
    return true;
  }

  private place(r: number, h: number): void {
    const index = this.index;
    let i = h & this.mask;
    while (index[i] !== 0) i = (i + 1) & this.mask;
    index[i] = r + 1;
  }

  /** Takes row `r` out of the index, shifting later entries of its probe run back (no tombstones). */
  private unplace(r: number): void {
    const index = this.index;
    const mask = this.mask;
    let i = this.hashes[r]! & mask;
    while (index[i] !== r + 1) i = (i + 1) & mask;
    let hole = i;
    for (let j = (hole + 1) & mask; index[j] !== 0; j = (j + 1) & mask) {
      const home = this.hashes[index[j]! - 1]! & mask;
      // Move j into the hole unless its home lies cyclically in (hole, j].
      if (((j - home) & mask) >= ((j - hole) & mask)) {
        index[hole] = index[j]!;
        hole = j;
      }
    }
    index[hole] = 0;
  }

  private resize(capacity: number): void {
    const rows = this.rows;
    const state = new Float64Array(capacity * ROW);
    state.set(this.state.subarray(0, rows * ROW));
    const hashes = new Uint32Array(capacity);
    hashes.set(this.hashes.subarray(0, rows));
    const keys = new Uint8Array(capacity * KEY);
    keys.set(this.keys.subarray(0, rows * KEY));
    this.state = state;
    this.hashes = hashes;
    this.keys = keys;
    this.capacity = capacity;
    // Room for every row at most 3/4 full (a capacity of rows is allocated anyway).
    let size = MIN_ROWS * 2;
    while (size * 3 < capacity * 4) size *= 2;
    this.index = new Int32Array(size);
    this.mask = size - 1;
    for (let r = 0; r < rows; r++) this.place(r, hashes[r]!);
  }
}

/** The recent-key slot of `key`: its length and first character (a request's few keys mostly differ in one). */
function recentSlot(key: string): number {
  return (key.length ^ (key.charCodeAt(0) << 2)) & (RECENT_KEYS - 1);
}

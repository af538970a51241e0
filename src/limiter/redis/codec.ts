/**
 * @module The encoding shared with the Lua scripts: their texts, the packed bucket parameters they read,
 * and the integer replies they write. Any layout change here must match `lua/lib.lua` and the scripts.
 */
import { readFileSync } from 'node:fs';
import { StoreError } from '../errors.js';
import type { BucketSpec, BucketState, ConsumeOutcome } from '../types.js';
import type { TimedState } from '../read.js';

/** What a script command takes: the key count first, then KEYS, then ARGV. */
export type Arg = string | number | Buffer;

/** The shared prelude (the algorithms) is prepended to each script so the formulas exist once in Lua. */
const LIB = readFileSync(new URL('./lua/lib.lua', import.meta.url), 'utf8');
const script = (name: string): string =>
  `${LIB}\n${readFileSync(new URL(`./lua/${name}.lua`, import.meta.url), 'utf8')}`;

/** The script texts as sent to Redis (prelude included); tests drive them directly too. */
export const luaScripts = {
  consume: script('consume'),
  consumeBatch: script('consume-batch'),
  peek: script('peek'),
  refund: script('refund'),
} as const;

/** Integers per bucket in a consume reply: remaining, resetAt, limited, retryAt. */
export const PLAIN_STRIDE = 4;
/** Reserve mode adds: charged `a` (−1: not charged), remaining and resetAt before the charge. */
export const RESERVE_STRIDE = 7;

/** consume.lua's algorithm codes (ALGORITHM in lua/lib.lua). */
const ALGORITHM_CODE: Readonly<Record<BucketSpec['algorithm'], number>> = {
  'fixed-window': 0,
  'sliding-window': 1,
  'token-bucket': 2,
};
/** Doubles per bucket in the packed parameters: algorithm code, limit, periodMs, cost, shadow. */
const PARAMS_PER_BUCKET = 5;

/** Added to the algorithm code of a bucket that asks for a lease (LEASE_FLAG in lua/lib.lua). */
const LEASE_FLAG = 8;

/** Does this bucket ask the script for a lease? (Only in plain and batch calls, never in a reservation.) */
function asks(spec: BucketSpec): boolean {
  return spec.lease !== undefined && spec.lease > 0;
}

/** Does any bucket of the request ask for a lease? Its reply then ends with the extra granted per bucket. */
export function asksLease(specs: readonly BucketSpec[]): boolean {
  for (let i = 0; i < specs.length; i++) if (asks(specs[i]!)) return true;
  return false;
}

/** Doubles of the packed parameters of `specs` (the buckets `idx`, all when null). */
function paramsDoubles(specs: readonly BucketSpec[], idx: readonly number[] | null, leases: boolean): number {
  const n = idx ? idx.length : specs.length;
  let doubles = PARAMS_PER_BUCKET * n;
  if (leases) for (let k = 0; k < n; k++) if (asks(specs[idx ? idx[k]! : k]!)) doubles += 2;
  return doubles;
}

/** A Float64Array writes the platform's byte order; the scripts read little-endian (x86 and ARM are). */
const BIG_ENDIAN = new Uint8Array(Float64Array.of(1).buffer)[0] === 0x3f;

/**
 * A buffer of `n` doubles and the view they are written through: a store per value rather than
 * writeDoubleLE's bounds check and eight byte stores. The view needs 8-byte alignment, which the pool's
 * slices have; a buffer of its own is taken should one not.
 */
function doubles(n: number): { buf: Buffer; view: Float64Array } {
  let buf = Buffer.allocUnsafe(8 * n);
  if (buf.byteOffset % 8 !== 0) buf = Buffer.alloc(8 * n);
  return { buf, view: new Float64Array(buf.buffer, buf.byteOffset, n) };
}

/** The buffer once its doubles are written, in the scripts' byte order. */
const littleEndian = (buf: Buffer): Buffer => (BIG_ENDIAN ? buf.swap64() : buf);

/**
 * Writes the parameters of the buckets `idx` (all when null) from double `at` on, as the scripts read
 * them (PARAMS in lua/lib.lua: five doubles each, and for a lease ask two more: extra wanted and share);
 * returns the index after them. One binary argument instead of five strings per bucket: every argument
 * costs ioredis a copy and an encoding step, and Redis a Lua string and a number conversion.
 */
function writeBucketParams(
  d: Float64Array,
  at: number,
  specs: readonly BucketSpec[],
  idx: readonly number[] | null,
  leases = false,
): number {
  const n = idx ? idx.length : specs.length;
  for (let k = 0; k < n; k++) {
    const spec = specs[idx ? idx[k]! : k]!;
    const lease = leases && asks(spec);
    d[at++] = ALGORITHM_CODE[spec.algorithm] + (lease ? LEASE_FLAG : 0);
    d[at++] = spec.limit;
    d[at++] = spec.periodMs;
    d[at++] = spec.cost;
    d[at++] = spec.shadow ? 1 : 0;
    if (lease) {
      d[at++] = spec.lease!;
      d[at++] = Math.max(1, spec.leaseShare ?? 1);
    }
  }
  return at;
}

/** The packed parameters of `specs`, as consume.lua takes them (tests drive the script with it). */
export function encodeBucketParams(
  specs: readonly Pick<BucketSpec, 'algorithm' | 'limit' | 'periodMs' | 'cost' | 'shadow' | 'lease' | 'leaseShare'>[],
): Buffer {
  const all = specs as readonly BucketSpec[];
  const { buf, view } = doubles(paramsDoubles(all, null, true));
  writeBucketParams(view, 0, all, null, true);
  return littleEndian(buf);
}

/** The key count, KEYS and ARGV of consume.lua for the buckets `idx` (all of them when null). */
export function consumeArgs(
  specs: readonly BucketSpec[],
  keys: readonly string[],
  idx: readonly number[] | null,
  clock: string,
  mode: '' | 'reserve',
): Arg[] {
  const n = idx ? idx.length : specs.length;
  const leases = mode === '';
  const args: Arg[] = new Array(n + 4);
  args[0] = n;
  for (let k = 0; k < n; k++) args[k + 1] = keys[idx ? idx[k]! : k]!;
  args[n + 1] = clock;
  args[n + 2] = mode;
  const { buf, view } = doubles(paramsDoubles(specs, idx, leases));
  writeBucketParams(view, 0, specs, idx, leases);
  args[n + 3] = littleEndian(buf);
  return args;
}

/** One request of a batch: its buckets and their prefixed keys. */
export interface BatchEntry {
  readonly specs: readonly BucketSpec[];
  readonly keys: readonly string[];
}

/**
 * consume-batch.lua's arguments. KEYS: every request's keys in turn. ARGV: the clock, then per request
 * its bucket count and parameters, packed into one buffer.
 */
export function batchArgs(batch: readonly BatchEntry[], clock: string): Arg[] {
  let keyCount = 0;
  let count = batch.length;
  for (const call of batch) {
    keyCount += call.keys.length;
    count += paramsDoubles(call.specs, null, true);
  }
  const { buf, view } = doubles(count);
  const args: Arg[] = new Array(1 + keyCount + 2);
  let k = 0;
  let at = 0;
  args[k++] = keyCount;
  for (const call of batch) {
    for (const key of call.keys) args[k++] = key;
    view[at++] = call.specs.length;
    at = writeBucketParams(view, at, call.specs, null, true);
  }
  args[k++] = clock;
  args[k++] = littleEndian(buf);
  return args;
}

/** consume-batch.lua's reply, one outcome per request in order; throws a script StoreError when malformed. */
export function parseBatch(reply: unknown, batch: readonly BatchEntry[]): ConsumeOutcome[] {
  let ints = 1 + batch.length;
  for (const call of batch) ints += (asksLease(call.specs) ? PLAIN_STRIDE + 1 : PLAIN_STRIDE) * call.keys.length;
  if (!isIntArray(reply, ints)) throw badReply('consume', reply);
  const now = reply[0]!;
  const out: ConsumeOutcome[] = new Array(batch.length);
  let o = 1;
  for (let i = 0; i < batch.length; i++) {
    const specs = batch[i]!.specs;
    const n = specs.length;
    const leased = asksLease(specs);
    out[i] = { allowed: reply[o] === 1, decider: 'store', now, buckets: readBuckets(reply, o + 1, n, leased) };
    o += 1 + (leased ? PLAIN_STRIDE + 1 : PLAIN_STRIDE) * n;
  }
  return out;
}

/** consume.lua's plain reply for `n` buckets (`leased`: some asked for a lease, the extras follow). */
export function parsePlain(r: unknown, n: number, leased = false): ConsumeOutcome {
  if (!isIntArray(r, 2 + (leased ? PLAIN_STRIDE + 1 : PLAIN_STRIDE) * n)) throw badReply('consume', r);
  return { allowed: r[0] === 1, decider: 'store', now: r[1]!, buckets: readBuckets(r, 2, n, leased) };
}

/** peek.lua's reply: the bucket's state, and the store's clock when it was read. */
export function parsePeek(r: unknown): TimedState {
  if (!isIntArray(r, PLAIN_STRIDE + 1)) throw badReply('peek', r);
  return { state: { remaining: r[0]!, resetAt: r[1]!, limited: r[2] === 1, retryAt: r[3]! }, now: r[4]! };
}

/** `n` bucket states from a consume reply, from `offset` on (remaining, resetAt, limited, retryAt each). */
function readBuckets(r: readonly number[], offset: number, n: number, leased: boolean): BucketState[] {
  const buckets: BucketState[] = new Array(n);
  const g = offset + PLAIN_STRIDE * n;
  for (let k = 0, o = offset; k < n; k++, o += PLAIN_STRIDE) {
    buckets[k] = leased
      ? { remaining: r[o]!, resetAt: r[o + 1]!, limited: r[o + 2] === 1, retryAt: r[o + 3]!, leased: r[g + k]! }
      : { remaining: r[o]!, resetAt: r[o + 1]!, limited: r[o + 2] === 1, retryAt: r[o + 3]! };
  }
  return buckets;
}

export function isIntArray(r: unknown, length: number): r is number[] {
  return Array.isArray(r) && r.length === length && typeof r[0] === 'number';
}

export function badReply(what: string, r: unknown): StoreError {
  return new StoreError('script', `store ${what}: unexpected reply ${JSON.stringify(r)?.slice(0, 200)}`);
}

/**
 * @module The encoding shared with the Lua scripts: their texts, the packed bucket parameters they read,
 * and the integer replies they write. Any layout change here must match `lua/lib.lua` and the scripts.
 */
import { readFileSync } from 'node:fs';
import { StoreError } from './errors.js';
import type { BucketSpec, BucketState, ConsumeOutcome } from './types.js';

/** What a script command takes: the key count first, then KEYS, then ARGV. */
export type Arg = string | number | Buffer;

/** The shared prelude (the algorithms) is prepended to each script so the formulas exist once in Lua. */
const LIB = readFileSync(new URL('./lua/lib.lua', import.meta.url), 'utf8');
const script = (name: string): string => `${LIB}\n${readFileSync(new URL(`./lua/${name}.lua`, import.meta.url), 'utf8')}`;

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
const ALGORITHM_CODE: Readonly<Record<BucketSpec['algorithm'], number>> = { 'fixed-window': 0, 'sliding-window': 1, 'token-bucket': 2 };
/** Doubles per bucket in the packed parameters: algorithm code, limit, periodMs, cost, shadow. */
const PARAMS_PER_BUCKET = 5;

/**
 * Writes the parameters of the buckets `idx` (all when null) at `offset` as the scripts read them
 * (PARAMS in lua/lib.lua: five little-endian doubles each); returns the offset after them. One binary
 * argument instead of five strings per bucket: every argument costs ioredis a copy and an encoding
 * step, and Redis a Lua string and a number conversion.
 */
function writeBucketParams(buf: Buffer, offset: number, specs: readonly BucketSpec[], idx: readonly number[] | null): number {
  const n = idx ? idx.length : specs.length;
  for (let k = 0; k < n; k++) {
    const spec = specs[idx ? idx[k]! : k]!;
    offset = buf.writeDoubleLE(ALGORITHM_CODE[spec.algorithm], offset);
    offset = buf.writeDoubleLE(spec.limit, offset);
    offset = buf.writeDoubleLE(spec.periodMs, offset);
    offset = buf.writeDoubleLE(spec.cost, offset);
    offset = buf.writeDoubleLE(spec.shadow ? 1 : 0, offset);
  }
  return offset;
}

/** The packed parameters of `specs`, as consume.lua takes them (tests drive the script with it). */
export function encodeBucketParams(specs: readonly Pick<BucketSpec, 'algorithm' | 'limit' | 'periodMs' | 'cost' | 'shadow'>[]): Buffer {
  const buf = Buffer.allocUnsafe(8 * PARAMS_PER_BUCKET * specs.length);
  writeBucketParams(buf, 0, specs as readonly BucketSpec[], null);
  return buf;
}

/** The key count, KEYS and ARGV of consume.lua for the buckets `idx` (all of them when null). */
export function consumeArgs(specs: readonly BucketSpec[], keys: readonly string[], idx: readonly number[] | null, clock: string, mode: '' | 'reserve'): Arg[] {
  const n = idx ? idx.length : specs.length;
  const args: Arg[] = new Array(n + 4);
  args[0] = n;
  for (let k = 0; k < n; k++) args[k + 1] = keys[idx ? idx[k]! : k]!;
  args[n + 1] = clock;
  args[n + 2] = mode;
  const params = Buffer.allocUnsafe(8 * PARAMS_PER_BUCKET * n);
  writeBucketParams(params, 0, specs, idx);
  args[n + 3] = params;
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
  for (const call of batch) keyCount += call.keys.length;
  const params = Buffer.allocUnsafe(8 * (batch.length + PARAMS_PER_BUCKET * keyCount));
  const args: Arg[] = new Array(1 + keyCount + 2);
  let k = 0;
  let offset = 0;
  args[k++] = keyCount;
  for (const call of batch) {
    for (const key of call.keys) args[k++] = key;
    offset = params.writeDoubleLE(call.specs.length, offset);
    offset = writeBucketParams(params, offset, call.specs, null);
  }
  args[k++] = clock;
  args[k++] = params;
  return args;
}

/** consume-batch.lua's reply, one outcome per request in order; throws a script StoreError when malformed. */
export function parseBatch(reply: unknown, batch: readonly BatchEntry[]): ConsumeOutcome[] {
  let keyCount = 0;
  for (const call of batch) keyCount += call.keys.length;
  if (!isIntArray(reply, 1 + batch.length + PLAIN_STRIDE * keyCount)) throw badReply('consume', reply);
  const now = reply[0]!;
  const out: ConsumeOutcome[] = new Array(batch.length);
  let o = 1;
  for (let i = 0; i < batch.length; i++) {
    const n = batch[i]!.specs.length;
    out[i] = { allowed: reply[o] === 1, now, buckets: readBuckets(reply, o + 1, n) };
    o += 1 + PLAIN_STRIDE * n;
  }
  return out;
}

/** consume.lua's plain reply for `n` buckets. */
export function parsePlain(r: unknown, n: number): ConsumeOutcome {
  if (!isIntArray(r, 2 + PLAIN_STRIDE * n)) throw badReply('consume', r);
  return { allowed: r[0] === 1, now: r[1]!, buckets: readBuckets(r, 2, n) };
}

/** peek.lua's reply. */
export function parsePeek(r: unknown): BucketState {
  if (!isIntArray(r, PLAIN_STRIDE)) throw badReply('peek', r);
  return { remaining: r[0]!, resetAt: r[1]!, limited: r[2] === 1, retryAt: r[3]! };
}

/** `n` bucket states from a consume reply, from `offset` on (remaining, resetAt, limited, retryAt each). */
function readBuckets(r: readonly number[], offset: number, n: number): BucketState[] {
  const buckets: BucketState[] = new Array(n);
  for (let k = 0, o = offset; k < n; k++, o += PLAIN_STRIDE) {
    buckets[k] = { remaining: r[o]!, resetAt: r[o + 1]!, limited: r[o + 2] === 1, retryAt: r[o + 3]! };
  }
  return buckets;
}

export function isIntArray(r: unknown, length: number): r is number[] {
  return Array.isArray(r) && r.length === length && typeof r[0] === 'number';
}

export function badReply(what: string, r: unknown): StoreError {
  return new StoreError('script', `store ${what}: unexpected reply ${JSON.stringify(r)?.slice(0, 200)}`);
}

/**
 * @module The guard state's two rare, whole-set operations in Redis, both in bounded chunks: reading
 * every entry again (at start, or for a replica that fell behind the change log), and writing this
 * replica's entries back to a store that lost them. Also how an entry is written as a hash field and
 * JSON value, and read back.
 */
import { isLive, type GuardEntry } from './entry.js';
import { fieldOf, GuardView } from './view.js';
import { LOG_MAXLEN, type GuardClient, type GuardKeys } from './redis-scripts.js';

/** Entries per HSCAN or write-back call: each call's reply stays around 100 KB. */
const CHUNK = 1_000;
/** The bound of each call of these operations (not of the whole). */
const CALL_MS = 2_000;

export function entryJson(e: GuardEntry): string {
  return JSON.stringify({
    reason: e.reason,
    createdAt: e.createdAt,
    expiresAt: e.expiresAt,
    ...(e.who !== undefined ? { who: e.who } : {}),
  });
}

/** The sorted-set score of an entry: its expiry. */
export function entryScore(e: GuardEntry): string {
  return e.expiresAt === null ? '+inf' : String(e.expiresAt);
}

export function parseEntry(field: string, json: string): GuardEntry | null {
  const bar = field.indexOf('|');
  const kind = field.slice(0, bar);
  if (kind !== 'block' && kind !== 'exempt' && kind !== 'ban' && kind !== 'surge') return null;
  const id = field.slice(bar + 1);
  if (kind === 'ban' && id.indexOf('/') <= 0) return null;
  try {
    const v = JSON.parse(json) as { reason?: unknown; createdAt?: unknown; expiresAt?: unknown; who?: unknown };
    return {
      kind,
      id,
      reason: typeof v.reason === 'string' ? v.reason : '',
      createdAt: typeof v.createdAt === 'number' ? v.createdAt : 0,
      expiresAt: typeof v.expiresAt === 'number' ? v.expiresAt : null,
      ...(typeof v.who === 'string' ? { who: v.who } : {}),
    };
  } catch {
    return null;
  }
}

export function bounded<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    p,
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`store did not answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** The whole set as a fresh view, and the version (and its record's tag) it is current from. */
export interface FullRead {
  readonly view: GuardView;
  readonly version: number;
  readonly tag: string | null;
}

/**
 * Reads every entry, a chunk at a time. The version is read first: a change made during the scan may
 * or may not be seen by it, and is applied again from the log after it (records carry whole entries, so
 * applying one twice is harmless). Expired fields found on the way are deleted.
 */
export async function readAll(client: GuardClient, keys: GuardKeys, now: () => number): Promise<FullRead> {
  const head = await bounded(client.rgPoll(keys.version, keys.log, 0, 0), CALL_MS);
  const version = head.length === 0 ? 0 : Number(head[0]);
  const tagged = version > 0 ? await bounded(client.rgPoll(keys.version, keys.log, version, 0), CALL_MS) : [];
  const view = new GuardView(now);
  let cursor = '0';
  do {
    const [next, flat] = await bounded(client.hscan(keys.entries, cursor, 'COUNT', CHUNK), CALL_MS);
    cursor = next;
    const t = now();
    const dead: string[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const e = parseEntry(flat[i]!, flat[i + 1]!);
      if (e !== null && isLive(e, t)) view.put(e);
      else dead.push(flat[i]!);
    }
    // Any replica may sweep: HDEL of an already-deleted field is harmless.
    if (dead.length > 0) client.hdel(keys.entries, ...dead).catch(() => {});
  } while (cursor !== '0');
  return { view, version, tag: tagged.length === 0 || tagged[1] === '' ? null : tagged[1] };
}

/**
 * Writes `entries` back where the store lacks them (HSETNX: an entry written meanwhile wins), then
 * moves the version past `last` with a reset record. The number of entries written.
 */
export async function writeBack(
  client: GuardClient,
  keys: GuardKeys,
  entries: readonly GuardEntry[],
  last: number,
  tag: string,
): Promise<number> {
  const byGroup = new Map<string, GuardEntry[]>();
  for (const e of entries) {
    const group = keys.group(fieldOf(e.kind, e.id));
    const list = byGroup.get(group);
    if (list === undefined) byGroup.set(group, [e]);
    else list.push(e);
  }
  let written = 0;
  for (const [group, list] of byGroup) {
    for (let i = 0; i < list.length; i += CHUNK) {
      const args = list.slice(i, i + CHUNK).flatMap((e) => [fieldOf(e.kind, e.id), entryJson(e), entryScore(e)]);
      written += await bounded(client.rgRestore(keys.entries, group, ...args), CALL_MS);
    }
  }
  await bounded(client.rgRestored(keys.version, keys.log, last, tag, LOG_MAXLEN, keys.channel), CALL_MS);
  return written;
}

/**
 * @module The guard state's Lua scripts and key names in Redis. Every change to the entries hash bumps
 * the version counter and appends one record to a change log (a Stream whose entry ids are the
 * versions: `<version>-0`), and is announced on a channel, so a replica reads only what changed since
 * the version it applied last. Every key carries the `{guard}` hash tag: one slot on a cluster, as
 * before, so each script is atomic there too. Each entry also sits in a sorted set of its group
 * (blocks, exemptions, one per ban name) scored by its expiry: writes sweep a few expired entries there,
 * and the ban cap takes the ban nearest its end from it.
 */
import type { Cluster, Redis } from 'ioredis';

/** The change log keeps about this many records; a replica further behind reads the whole set again. */
export const LOG_MAXLEN = 20_000;

/**
 * Shared by the scripts that change entries. `append` bumps the version and logs the change under it
 * (a log ahead of the version, after the version key alone was lost, starts again), then announces it.
 * `sweep` drops up to `n` expired entries of a group (checking the entry's own expiry: an earlier
 * release wrote entries without scoring them).
 */
const COMMON = `
local function append(version, log, channel, maxlen, op, field, json, tag)
  local v = redis.call('INCR', version)
  local id = v .. '-0'
  local r = redis.pcall('XADD', log, 'MAXLEN', '~', maxlen, id, 'o', op, 'f', field, 'j', json, 't', tag)
  if type(r) == 'table' and r.err then
    redis.call('DEL', log)
    redis.call('XADD', log, 'MAXLEN', '~', maxlen, id, 'o', op, 'f', field, 'j', json, 't', tag)
  end
  redis.call('PUBLISH', channel, v)
  return v
end
local function expired(json, now)
  local ok, e = pcall(cjson.decode, json)
  return ok and type(e.expiresAt) == 'number' and e.expiresAt <= now
end
local function sweep(entries, group, now, n)
  for _, f in ipairs(redis.call('ZRANGEBYSCORE', group, '-inf', now, 'LIMIT', 0, n)) do
    local cur = redis.call('HGET', entries, f)
    if not cur or expired(cur, now) then redis.call('HDEL', entries, f) end
    redis.call('ZREM', group, f)
  end
end
`;

/** KEYS: entries, version, log, group. ARGV: field, json, expiry score, tag, maxlen, now, channel. */
const PUT = `${COMMON}
sweep(KEYS[1], KEYS[4], tonumber(ARGV[6]), 16)
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[1])
return append(KEYS[2], KEYS[3], ARGV[7], ARGV[5], 'p', ARGV[1], ARGV[2], ARGV[4])`;

/** KEYS: entries, version, log, group. ARGV: field, tag, maxlen, channel, force. The entry's JSON ('' if only forced), or nil. */
const REMOVE = `${COMMON}
local old = redis.call('HGET', KEYS[1], ARGV[1])
if not old and ARGV[5] ~= '1' then return false end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
append(KEYS[2], KEYS[3], ARGV[4], ARGV[3], 'd', ARGV[1], '', ARGV[2])
return old or ''`;

/**
 * Counts one ban event; at the limit starts the ban, then ends the ban's oldest (nearest their end)
 * beyond `maxActive`. KEYS: counter, entries, version, log, group. ARGV: field, limit, periodMs, json,
 * now, expiresAt, tag, maxlen, channel, maxActive. Nil, or {json or '' (the cap ended it at once), the
 * fields of live bans ended…}.
 */
const COUNT_BAN = `${COMMON}
local now = tonumber(ARGV[5])
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if cur and not expired(cur, now) then return false end
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
if n < tonumber(ARGV[2]) then return false end
redis.call('DEL', KEYS[1])
sweep(KEYS[2], KEYS[5], now, 16)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
redis.call('ZADD', KEYS[5], ARGV[6], ARGV[1])
local out = {ARGV[4]}
local over = redis.call('ZCARD', KEYS[5]) - tonumber(ARGV[10])
if over > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[5], over)
  for i = 1, #popped, 2 do
    local f = popped[i]
    redis.call('HDEL', KEYS[2], f)
    if f == ARGV[1] then
      out[1] = ''
    elseif tonumber(popped[i + 1]) > now then
      append(KEYS[3], KEYS[4], ARGV[9], ARGV[8], 'd', f, '', ARGV[7])
      out[#out + 1] = f
    end
  end
end
if out[1] ~= '' then append(KEYS[3], KEYS[4], ARGV[9], ARGV[8], 'p', ARGV[1], ARGV[4], ARGV[7]) end
return out`;

/**
 * What changed since version `last`. KEYS: version, log. ARGV: last, count. {} when there is no
 * version; else {version, the tag of record `last` ('' when not in the log), records after it…}.
 */
const POLL = `
local v = redis.call('GET', KEYS[1])
if not v then return {} end
local last = tonumber(ARGV[1])
local at = ''
if last > 0 then
  local r = redis.call('XRANGE', KEYS[2], last .. '-0', last .. '-0')
  if #r > 0 then
    local f = r[1][2]
    for i = 1, #f, 2 do if f[i] == 't' then at = f[i + 1] end end
  end
end
local changes = {}
if tonumber(v) > last and tonumber(ARGV[2]) > 0 then changes = redis.call('XRANGE', KEYS[2], (last + 1) .. '-0', '+', 'COUNT', ARGV[2]) end
return {v, at, changes}`;

/** Writes back entries the store lacks. KEYS: entries, group. ARGV: field, json, score, … The number written. */
const RESTORE = `
local n = 0
for i = 1, #ARGV, 3 do
  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) == 1 then
    redis.call('ZADD', KEYS[2], ARGV[i + 2], ARGV[i])
    n = n + 1
  end
end
return n`;

/**
 * After a write-back: the version goes past the writer's last (so that no replica mistakes the new
 * history for the one it applied) and a reset record tells every replica to read the set again.
 * KEYS: version, log. ARGV: last, tag, maxlen, channel.
 */
const RESTORED = `${COMMON}
local v = tonumber(redis.call('GET', KEYS[1]) or '0')
if v < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
return append(KEYS[1], KEYS[2], ARGV[4], ARGV[3], 'r', '', '', ARGV[2])`;

/** Takes a slot when fewer than `max` unexpired leases are held. */
const ACQUIRE = `
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`;

/** A change log record as POLL returns it: [id, [field, value, …]]. */
export type LogRecord = [string, string[]];

export type GuardClient = (Redis | Cluster) & {
  rgPut(
    entries: string,
    version: string,
    log: string,
    group: string,
    field: string,
    json: string,
    score: string,
    tag: string,
    maxlen: number,
    now: number,
    channel: string,
  ): Promise<number>;
  rgRemove(
    entries: string,
    version: string,
    log: string,
    group: string,
    field: string,
    tag: string,
    maxlen: number,
    channel: string,
    force: string,
  ): Promise<string | null>;
  rgCountBan(
    counter: string,
    entries: string,
    version: string,
    log: string,
    group: string,
    field: string,
    limit: number,
    periodMs: number,
    json: string,
    now: number,
    expiresAt: number,
    tag: string,
    maxlen: number,
    channel: string,
    maxActive: number,
  ): Promise<string[] | null>;
  rgPoll(version: string, log: string, last: number, count: number): Promise<[] | [string, string, LogRecord[]]>;
  rgRestore(entries: string, group: string, ...fieldJsonScore: string[]): Promise<number>;
  rgRestored(version: string, log: string, last: number, tag: string, maxlen: number, channel: string): Promise<number>;
  rgAcquire(key: string, now: number, max: number, leaseMs: number, lease: string): Promise<number>;
};

export function defineGuardScripts(client: Redis | Cluster): GuardClient {
  client.defineCommand('rgPut', { numberOfKeys: 4, lua: PUT });
  client.defineCommand('rgRemove', { numberOfKeys: 4, lua: REMOVE });
  client.defineCommand('rgCountBan', { numberOfKeys: 5, lua: COUNT_BAN });
  client.defineCommand('rgPoll', { numberOfKeys: 2, lua: POLL });
  client.defineCommand('rgRestore', { numberOfKeys: 2, lua: RESTORE });
  client.defineCommand('rgRestored', { numberOfKeys: 2, lua: RESTORED });
  client.defineCommand('rgAcquire', { numberOfKeys: 1, lua: ACQUIRE });
  return client as GuardClient;
}

/** The guard's key names under one prefix. */
export class GuardKeys {
  readonly tag: string;
  readonly entries: string;
  readonly version: string;
  readonly log: string;
  /** The pub/sub channel each change is announced on (wakes replicas that keep no timer). */
  readonly channel: string;

  constructor(readonly prefix: string) {
    this.tag = `${prefix}:{guard}`;
    this.entries = `${this.tag}:entries`;
    this.version = `${this.tag}:version`;
    this.log = `${this.tag}:log`;
    this.channel = `${this.tag}:changed`;
  }

  /** The sorted set of a field's group: `block`, `exempt`, or one per ban name. */
  group(field: string): string {
    const bar = field.indexOf('|');
    const kind = field.slice(0, bar);
    if (kind !== 'ban') return `${this.tag}:exp:${kind}`;
    const id = field.slice(bar + 1);
    return `${this.tag}:exp:ban:${id.slice(0, id.indexOf('/'))}`;
  }

  counter(banId: string): string {
    return `${this.tag}:count:${banId}`;
  }
}

-- @module Shared prelude of every rategate script: the three algorithms of `algorithms.ts`, line for line.
--
-- redis-codec.ts prepends this file to consume.lua, peek.lua and refund.lua before registering them, so the
-- algorithms exist once in Lua as they exist once in TypeScript. Keep both files in step: the store
-- contract suite runs the same scripted requests against memory and Redis and compares every number.
--
-- Numbers: Lua 5.1 numbers are doubles, like JavaScript's, and every value here is an integer below 2^53
-- (token-bucket TATs are epoch µs, about 1.8e15), so the same operations give the same results on both
-- sides. Two traps are avoided on purpose:
--   * `tostring`/implicit conversion prints "%.14g" (1.8e15 becomes "1.8e+15"): state is stored packed
--     as three doubles (struct.pack), never as text; a number passed to redis.call is an epoch-ms
--     expiry (13 digits, printed exactly by "%.14g" until the year 5138) or a TTL.
--   * Lua's `a % b` is a - floor(a/b)*b, which is inexact for large a; math.fmod is exact like JS `%`.
-- Replies are integers only, because Redis truncates Lua numbers in replies.

-- Writes of state computed from TIME need effects replication; it is the default from Redis 7 on and
-- must be asked for on 3.2–6.x. pcall: the function is deprecated and may go away.
if redis.replicate_commands then pcall(redis.replicate_commands) end

local floor, ceil, max, min, fmod = math.floor, math.ceil, math.max, math.min, math.fmod
local pack, unpack, call, tonumber = struct.pack, struct.unpack, redis.call, tonumber

-- The clock: ARGV[1] empty → Redis TIME, so gateway replicas with skewed clocks agree; otherwise an
-- epoch-ms override that only tests pass (the contract suite scripts time with a fake clock).
local clock_overridden, clock_now = false, 0
local function clock_ms(override)
  if override ~= nil and override ~= '' then
    clock_overridden, clock_now = true, tonumber(override)
  else
    local t = call('TIME')
    clock_now = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
  end
  return clock_now
end

-- State is stored as three little-endian doubles, 24 bytes (struct is bundled with Redis's Lua): one
-- C call to read or write, where text needed a pattern match and three number conversions each way,
-- which were most of the script's time. Doubles hold every state value exactly (integers < 2^53).
local STATE = '<ddd'

local function read_state(key)
  local v = call('GET', key)
  if not v or #v ~= 24 then return 0, 0, 0 end -- absent, or not ours: an empty bucket
  local a, b, c = unpack(STATE, v)
  return a, b, c
end

-- How long past a scripted-clock state's distance the server keeps its key (write_state says why).
local SCRIPTED_KEEP_MS = 3600000

-- One SET with its expiry (PXAT/PX: Redis >= 6.2) rather than SET + PEXPIREAT: a third fewer commands.
-- The key lives until the state's expireAt: after it the state carries no information, and a gone key
-- is the same as an empty bucket.
local function write_state(key, a, b, c, expire_at)
  if clock_overridden then
    -- A scripted (test) time does not move with the server's expiry clock: on a loaded machine the wall
    -- clock runs ahead of a test's, and a key expired by it lost state the scripted time still counts.
    -- A state past its expireAt reads as an empty bucket, so a key kept longer decides the same: the
    -- server expiry here only bounds the garbage, an hour past the scripted distance.
    local ttl = expire_at - clock_now
    if ttl <= 0 then
      call('DEL', key)
    else
      call('SET', key, pack(STATE, a, b, c), 'PX', ttl + SCRIPTED_KEEP_MS)
    end
  elseif expire_at <= clock_now then
    call('DEL', key)
  else
    call('SET', key, pack(STATE, a, b, c), 'PXAT', expire_at)
  end
end

-- Microseconds per token; at least 1. JS Math.round(x) is floor(x + 0.5) for the positive x here.
local function emission_interval_us(limit, period)
  return max(1, floor(period * 1000 / limit + 0.5))
end

-- Return the fields of algorithms.ts `Evaluation` as ten values (not a table: one table per bucket was
-- a measurable share of the script's time):
--   ok, na, nb, nc (next state), expire_at, rem_charged, rem_now, reset_charged, reset_now, retry_at
local function fixed_window(limit, period, cost, sa, sb, now)
  local start = now - fmod(now, period)
  local count = 0
  if sa == start then count = sb end
  local after = count + cost
  local finish = start + period
  local ok = after <= limit
  local reset_now = now
  if count > 0 then reset_now = finish end
  local retry = now
  if not ok then retry = finish end
  return ok, start, after, 0, finish,
    max(0, limit - after), max(0, limit - count),
    finish, reset_now, retry
end

-- Compared scaled by the period so everything stays an integer: cur·P + prev·(P − elapsed) ≤ limit·P.
local function sliding_window(limit, period, cost, sa, sb, sc, now)
  local P, L = period, limit
  local start = now - fmod(now, P)
  local cur, prev = 0, 0
  if sa == start then
    cur = sb
    prev = sc
  elseif sa == start - P then
    prev = sb
  end
  local unelapsed = P - (now - start)
  local scaled = cur * P + prev * unelapsed
  local scaled_after = scaled + cost * P
  local ok = scaled_after <= L * P

  local retry = now
  if not ok then
    -- Within this window the previous count decays: prev·(P − e) ≤ (L − cur − cost)·P.
    local room = (L - cur - cost) * P
    if room >= 0 and prev > 0 then
      retry = start + P - floor(room / prev)
    else
      -- Next window: this window's count becomes the decaying one: cur·(P − e') ≤ (L − cost)·P.
      local next_room = (L - cost) * P
      if cur == 0 then
        retry = start + P
      else
        retry = start + P + max(0, P - floor(next_room / cur))
      end
    end
  end
  local finish = start + P
  local reset_now = now
  if cur > 0 then reset_now = finish + P elseif prev > 0 then reset_now = finish end
  return ok, start, cur + cost, prev, finish + P,
    max(0, floor((L * P - scaled_after) / P)),
    max(0, floor((L * P - scaled) / P)),
    finish + P, reset_now, retry
end

-- GCRA over a theoretical arrival time in integer µs; admitted when tat' − now ≤ limit·T.
local function token_bucket(limit, period, cost, sa, now)
  local T = emission_interval_us(limit, period)
  local burst = T * limit
  local now_us = now * 1000
  local tat = max(sa, now_us)
  local tat_after = tat + cost * T
  local ok = tat_after - now_us <= burst
  local retry = now
  if not ok then retry = ceil((tat_after - burst) / 1000) end
  return ok, tat_after, 0, 0, ceil(tat_after / 1000),
    max(0, floor((burst - (tat_after - now_us)) / T)),
    max(0, floor((burst - (tat - now_us)) / T)),
    ceil(tat_after / 1000), ceil(tat / 1000), retry
end

-- Algorithm codes as the consume scripts receive them (redis-codec.ts ALGORITHM_CODE); peek gets the config
-- name and looks it up here (refund compares names itself).
local ALGORITHM = { ['fixed-window'] = 0, ['sliding-window'] = 1, ['token-bucket'] = 2 }

local function evaluate(code, limit, period, cost, sa, sb, sc, now)
  if code == 0 then return fixed_window(limit, period, cost, sa, sb, now) end
  if code == 1 then return sliding_window(limit, period, cost, sa, sb, sc, now) end
  if code == 2 then return token_bucket(limit, period, cost, sa, now) end
  error('rategate: unknown algorithm ' .. tostring(code))
end

-- A bucket's parameters, packed by redis-codec.ts (encodeBucketParams) as five little-endian doubles:
-- algorithm code, limit, periodMs, cost, shadow (1/0). One C call reads them, where five ARGV strings
-- needed three number conversions and cost the client one argument each.
local PARAMS = '<ddddd'
-- A bucket that asks for a lease (lease.ts) has LEASE_FLAG added to its algorithm code and two more
-- doubles after its five: the extra tokens wanted beyond the request's cost, and the share divisor
-- (2 × gateways): the extra granted is never more than what remains after the charge ÷ share.
local LEASE, LEASE_FLAG = '<dd', 8

-- Checks the n buckets KEYS[first_key …], whose parameters are packed in `params` from byte `pos` on
-- (PARAMS, one group per bucket), and charges all of them or none: every bucket is evaluated against
-- the state read before any write, then, only if no non-shadow bucket is full, each bucket that had
-- room is written. A full shadow bucket is reported limited but not charged (it is never pushed past
-- its limit). Mirrors MemoryStore.consumeSync.
-- Leases: a bucket that asks for one and is charged is charged cost + extra instead, extra being the
-- most of what it asked that fits in min(what remains after the charge ÷ share), in whole multiples of
-- the request's cost: the evaluation with
-- that larger cost is then the one written and reported (its remaining is after the lease). Only in
-- plain mode (a cross-slot reservation never leases).
-- Appends per bucket to `reply`: remaining, resetAt, limited (1/0), retryAt; in reserve mode also the
-- charged state `a` (−1 when this bucket was not charged: the refund key) and remaining and resetAt as
-- they stood before this charge; then, if any bucket asked for a lease, the extra granted per bucket.
-- Returns whether the request was allowed, and the position after its parameters.
local function consume_group(first_key, n, params, pos, now, reserve, reply)
  -- Pass 1 keeps each evaluation in `ev`, ten slots per bucket, in evaluate's order.
  local ev = {}
  local lz = nil -- lease asks: per bucket code, limit, period, cost, want, share, sa, sb, sc
  local allowed = true
  for i = 1, n do
    local code, limit, period, cost, shadow
    code, limit, period, cost, shadow, pos = unpack(PARAMS, params, pos)
    local sa, sb, sc = read_state(KEYS[first_key + i - 1])
    if code >= LEASE_FLAG then
      code = code - LEASE_FLAG
      local want, share
      want, share, pos = unpack(LEASE, params, pos)
      if lz == nil then lz = {} end
      lz[i] = { code, limit, period, cost, want, share, sa, sb, sc }
    end
    local e = (i - 1) * 10
    local ok
    ok, ev[e + 2], ev[e + 3], ev[e + 4], ev[e + 5], ev[e + 6], ev[e + 7], ev[e + 8], ev[e + 9], ev[e + 10] =
      evaluate(code, limit, period, cost, sa, sb, sc, now)
    ev[e + 1] = ok
    if not ok and shadow ~= 1 then allowed = false end
  end

  local m = #reply
  local granted = nil
  if lz ~= nil then granted = {} end
  for i = 1, n do
    local e = (i - 1) * 10
    local ok = ev[e + 1]
    local charged = allowed and ok
    local extra = 0
    local l = lz and lz[i]
    if charged and l and not reserve then
      extra = min(l[5], floor(ev[e + 6] / l[6]))
      -- Whole requests only: a lease is spent by requests of its rule's cost, so tokens short of one
      -- would sit unspendable while the store, missing them, refuses (4 × cost 3 of 10 admitted 2).
      if l[4] > 1 then extra = extra - fmod(extra, l[4]) end
      if extra > 0 then
        -- cost + remaining always fits (remaining counts requests of cost 1 after this one).
        local ok2, a, b, c, x, r1, r2, s1, s2, rt = evaluate(l[1], l[2], l[3], l[4] + extra, l[7], l[8], l[9], now)
        if ok2 then
          ev[e + 2], ev[e + 3], ev[e + 4], ev[e + 5], ev[e + 6], ev[e + 7], ev[e + 8], ev[e + 9], ev[e + 10] = a, b, c, x, r1, r2, s1, s2, rt
        else
          extra = 0
        end
      end
    end
    if granted then granted[i] = extra end
    if charged then
      write_state(KEYS[first_key + i - 1], ev[e + 2], ev[e + 3], ev[e + 4], ev[e + 5])
      reply[m + 1] = ev[e + 6] -- remaining after the charge
      reply[m + 2] = ev[e + 8] -- its reset
      reply[m + 3] = 0
      reply[m + 4] = now
    else
      reply[m + 1] = ok and ev[e + 7] or 0
      reply[m + 2] = ev[e + 9]
      reply[m + 3] = ok and 0 or 1
      reply[m + 4] = ev[e + 10]
    end
    m = m + 4
    if reserve then
      reply[m + 1] = charged and ev[e + 2] or -1
      reply[m + 2] = ok and ev[e + 7] or 0
      reply[m + 3] = ev[e + 9]
      m = m + 3
    end
  end
  if granted then
    for i = 1, n do reply[m + i] = granted[i] end
  end
  return allowed, pos
end

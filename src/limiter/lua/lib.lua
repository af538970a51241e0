-- @module Shared prelude of every rategate script: the three algorithms of `algorithms.ts`, line for line.
--
-- redis.ts prepends this file to consume.lua, peek.lua and refund.lua before registering them, so the
-- algorithms exist once in Lua as they exist once in TypeScript. Keep both files in step: the store
-- contract suite runs the same scripted requests against memory and Redis and compares every number.
--
-- Numbers: Lua 5.1 numbers are doubles, like JavaScript's, and every value here is an integer below 2^53
-- (token-bucket TATs are epoch µs, about 1.8e15), so the same operations give the same results on both
-- sides. Two traps are avoided on purpose:
--   * `tostring`/implicit conversion prints "%.14g" (1.8e15 becomes "1.8e+15"): state is written with
--     fmt_int, never by passing a number to redis.call or concatenating it.
--   * Lua's `a % b` is a - floor(a/b)*b, which is inexact for large a; math.fmod is exact like JS `%`.
-- Replies are integers only, because Redis truncates Lua numbers in replies.

-- Writes of state computed from TIME need effects replication; it is the default from Redis 7 on and
-- must be asked for on 3.2–6.x. pcall: the function is deprecated and may go away.
if redis.replicate_commands then pcall(redis.replicate_commands) end

local floor, ceil, max, fmod = math.floor, math.ceil, math.max, math.fmod

local function fmt_int(n)
  return string.format('%.0f', n)
end

-- The clock: ARGV[1] empty → Redis TIME, so gateway replicas with skewed clocks agree; otherwise an
-- epoch-ms override that only tests pass (the contract suite scripts time with a fake clock).
local clock_overridden, clock_now = false, 0
local function clock_ms(override)
  if override ~= nil and override ~= '' then
    clock_overridden, clock_now = true, tonumber(override)
  else
    local t = redis.call('TIME')
    clock_now = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
  end
  return clock_now
end

-- State is stored as one string "a:b:c" (one GET/SET per bucket, readable with redis-cli).
local function read_state(key)
  local v = redis.call('GET', key)
  if not v then return 0, 0, 0 end
  local a, b, c = string.match(v, '^(%d+):(%d+):(%d+)$')
  if not a then return 0, 0, 0 end -- not ours (or an older layout): treat as an empty bucket
  return tonumber(a), tonumber(b), tonumber(c)
end

-- One SET with its expiry (PXAT/PX: Redis >= 6.2) rather than SET + PEXPIREAT: a third fewer commands.
local function write_state(key, a, b, c, expire_at)
  local value = fmt_int(a) .. ':' .. fmt_int(b) .. ':' .. fmt_int(c)
  -- The key lives until the state's expireAt: after it the state carries no information, and a gone
  -- key is the same as an empty bucket.
  if clock_overridden then
    -- A scripted (test) time is unrelated to the server's expiry clock: keep the same distance instead.
    local ttl = expire_at - clock_now
    if ttl <= 0 then
      redis.call('DEL', key)
    else
      redis.call('SET', key, value, 'PX', fmt_int(ttl))
    end
  elseif expire_at <= clock_now then
    redis.call('DEL', key)
  else
    redis.call('SET', key, value, 'PXAT', fmt_int(expire_at))
  end
end

-- Microseconds per token; at least 1. JS Math.round(x) is floor(x + 0.5) for the positive x here.
local function emission_interval_us(limit, period)
  return max(1, floor(period * 1000 / limit + 0.5))
end

-- Returns the fields of algorithms.ts `Evaluation`, as a table:
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
  return {
    ok = ok, na = start, nb = after, nc = 0, expire_at = finish,
    rem_charged = max(0, limit - after), rem_now = max(0, limit - count),
    reset_charged = finish, reset_now = reset_now, retry_at = retry,
  }
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
  return {
    ok = ok, na = start, nb = cur + cost, nc = prev, expire_at = finish + P,
    rem_charged = max(0, floor((L * P - scaled_after) / P)),
    rem_now = max(0, floor((L * P - scaled) / P)),
    reset_charged = finish + P, reset_now = reset_now, retry_at = retry,
  }
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
  return {
    ok = ok, na = tat_after, nb = 0, nc = 0, expire_at = ceil(tat_after / 1000),
    rem_charged = max(0, floor((burst - (tat_after - now_us)) / T)),
    rem_now = max(0, floor((burst - (tat - now_us)) / T)),
    reset_charged = ceil(tat_after / 1000), reset_now = ceil(tat / 1000), retry_at = retry,
  }
end

-- algorithm is the config name ('fixed-window' | 'sliding-window' | 'token-bucket').
local function evaluate(algorithm, limit, period, cost, sa, sb, sc, now)
  if algorithm == 'fixed-window' then return fixed_window(limit, period, cost, sa, sb, now) end
  if algorithm == 'sliding-window' then return sliding_window(limit, period, cost, sa, sb, sc, now) end
  if algorithm == 'token-bucket' then return token_bucket(limit, period, cost, sa, now) end
  error('rategate: unknown algorithm ' .. tostring(algorithm))
end

-- @module consume-batch: the consume calls of several requests that arrived in the same turn of the
-- gateway's event loop, in one script call. Each request is charged all-or-nothing exactly as by
-- consume.lua, one after the other in arrival order, so the outcome is that of the same calls sent one
-- by one; only the number of round trips (and the per-call work on both sides) is smaller.
--
-- KEYS      every request's keys (prefixed), request after request; on a cluster all share one slot.
-- ARGV[1]   clock override ('' → Redis TIME), as for consume; one `now` serves the whole batch.
-- ARGV[2]   R, the number of requests.
-- ARGV[3 … 2+R]  the number of buckets of each request.
-- ARGV[3+R …]    per bucket, in KEYS order: algorithm, limit, periodMs, cost, shadow ('1' or '0').
--
-- Reply (integers only): now (ms), then per request: allowed (1/0) followed by remaining, resetAt,
-- limited (1/0), retryAt for each of its buckets.

local now = clock_ms(ARGV[1])
local requests = tonumber(ARGV[2])
local reply = { now }
local key, arg = 1, 3 + requests
for r = 1, requests do
  local n = tonumber(ARGV[2 + r])
  local at = #reply + 1
  reply[at] = 0
  if consume_group(key, n, arg, now, false, reply) then reply[at] = 1 end
  key = key + n
  arg = arg + 5 * n
end
return reply

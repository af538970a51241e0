-- @module consume-batch: the consume calls of several requests that arrived in the same turn of the
-- gateway's event loop, in one script call. Each request is charged all-or-nothing exactly as by
-- consume.lua, one after the other in arrival order, so the outcome is that of the same calls sent one
-- by one; only the number of round trips (and the per-call work on both sides) is smaller.
--
-- KEYS      every request's keys (prefixed), request after request; on a cluster all share one slot.
-- ARGV[1]   clock override ('' → Redis TIME), as for consume; one `now` serves the whole batch.
-- ARGV[2]   packed, request after request: its number of buckets n (one little-endian double), then
--           its buckets' parameters (PARAMS in lib.lua, n groups, in KEYS order).
--
-- Reply (integers only): now (ms), then per request: allowed (1/0) followed by remaining, resetAt,
-- limited (1/0), retryAt for each of its buckets.

local now = clock_ms(ARGV[1])
local params = ARGV[2]
local reply = { now }
local key, pos = 1, 1
while pos <= #params do
  local n
  n, pos = unpack('<d', params, pos)
  local at = #reply + 1
  reply[at] = 0
  local allowed
  allowed, pos = consume_group(key, n, params, pos, now, false, reply)
  if allowed then reply[at] = 1 end
  key = key + n
end
return reply

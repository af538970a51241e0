-- @module peek: one bucket's state as things stand, without charging it (MemoryStore.peek).
--
-- KEYS[1] the bucket's key (prefixed).
-- ARGV    clock override ('' → TIME), algorithm, limit, periodMs, cost.
-- Reply   remaining, resetAt, limited (1/0), retryAt.

local now = clock_ms(ARGV[1])
local sa, sb, sc = read_state(KEYS[1])
local e = evaluate(ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), sa, sb, sc, now)
return { e.rem_now, e.reset_now, e.ok and 0 or 1, e.retry_at }

-- @module peek: one bucket's state as things stand, without charging it (MemoryStore.peek).
--
-- KEYS[1] the bucket's key (prefixed).
-- ARGV    clock override ('' → TIME), algorithm, limit, periodMs, cost.
-- Reply   remaining, resetAt, limited (1/0), retryAt, and the store's clock (a read's `now`: the blocked
--         cache maps a block's times by it).

local now = clock_ms(ARGV[1])
local sa, sb, sc = read_state(KEYS[1])
local ok, _, _, _, _, _, rem_now, _, reset_now, retry_at =
  evaluate(ALGORITHM[ARGV[2]], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), sa, sb, sc, now)
return { rem_now, reset_now, ok and 0 or 1, retry_at, now }

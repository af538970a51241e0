-- @module consume: checks every bucket of one request (one slot) and charges all of them or none.
--
-- Mirrors MemoryStore.consumeSync: every bucket is evaluated against the state read before any write,
-- then, only if no non-shadow bucket is full, each bucket that had room is written. A full shadow bucket
-- is reported limited but not charged (it is never pushed past its limit).
--
-- KEYS[i]   the i-th bucket's key, store prefix included; in a cluster all share one slot (hash tag).
-- ARGV[1]   clock override: '' → Redis TIME; an epoch-ms integer → that time (tests only).
-- ARGV[2]   mode: '' → plain; 'reserve' → this call is one slot of a request spanning several slots, so
--           the reply also carries what the caller needs to refund this charge and to report the
--           buckets uncharged if another slot rejects.
-- ARGV[3 + 5(i−1) …] per bucket: algorithm, limit, periodMs, cost, shadow ('1' or '0').
--
-- Reply (integers only): allowed (1/0), now (ms), then per bucket
--   remaining, resetAt, limited (1/0), retryAt
--   and in reserve mode also: charged state `a` (−1 when this bucket was not charged: the refund key),
--   remaining and resetAt as they stood before this charge.

local now = clock_ms(ARGV[1])
local reserve = ARGV[2] == 'reserve'
local n = #KEYS
local evals = {}
local allowed = true

for i = 1, n do
  local base = 3 + (i - 1) * 5
  local sa, sb, sc = read_state(KEYS[i])
  local e = evaluate(ARGV[base], tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3]),
    sa, sb, sc, now)
  evals[i] = e
  if not e.ok and ARGV[base + 4] ~= '1' then allowed = false end
end

local reply = { allowed and 1 or 0, now }
for i = 1, n do
  local e = evals[i]
  local charged = allowed and e.ok
  if charged then
    write_state(KEYS[i], e.na, e.nb, e.nc, e.expire_at)
    reply[#reply + 1] = e.rem_charged
    reply[#reply + 1] = e.reset_charged
    reply[#reply + 1] = 0
    reply[#reply + 1] = now
  else
    if e.ok then reply[#reply + 1] = e.rem_now else reply[#reply + 1] = 0 end
    reply[#reply + 1] = e.reset_now
    reply[#reply + 1] = e.ok and 0 or 1
    reply[#reply + 1] = e.retry_at
  end
  if reserve then
    reply[#reply + 1] = charged and e.na or -1
    reply[#reply + 1] = e.ok and e.rem_now or 0
    reply[#reply + 1] = e.reset_now
  end
end
return reply

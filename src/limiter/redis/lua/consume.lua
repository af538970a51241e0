-- @module consume: checks every bucket of one request (one slot) and charges all of them or none
-- (consume_group in lib.lua).
--
-- KEYS[i]   the i-th bucket's key, store prefix included; in a cluster all share one slot (hash tag).
-- ARGV[1]   clock override: '' → Redis TIME; an epoch-ms integer → that time (tests only).
-- ARGV[2]   mode: '' → plain; 'reserve' → this call is one slot of a request spanning several slots, so
--           the reply also carries what the caller needs to refund this charge and to report the
--           buckets uncharged if another slot rejects.
-- ARGV[3]   every bucket's parameters, packed (PARAMS in lib.lua: five doubles per bucket, KEYS order).
--
-- Reply (integers only): allowed (1/0), now (ms), then per bucket
--   remaining, resetAt, limited (1/0), retryAt
--   and in reserve mode also: charged state `a` (−1 when this bucket was not charged: the refund key),
--   remaining and resetAt as they stood before this charge.

local now = clock_ms(ARGV[1])
local reply = { 0, now }
if consume_group(1, #KEYS, ARGV[3], 1, now, ARGV[2] == 'reserve', reply) then reply[1] = 1 end
return reply

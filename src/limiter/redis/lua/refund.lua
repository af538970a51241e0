-- @module refund: takes back one slot's charge when another slot of the same request rejected it.
--
-- Only used by the cluster store for a request whose buckets span several slots: each slot was charged
-- ("reserved") by consume.lua in reserve mode; if any slot rejected (or failed), the slots that charged
-- are refunded here. A refund never gives back more than the charge still weighs, so the stored state
-- always holds at least the requests actually admitted: the cluster may briefly under-admit (requests
-- that saw the reservation were judged against a fuller bucket), never over-admit.
--
-- KEYS[i]  the charged keys (prefixed), one slot.
-- ARGV[1]  clock override ('' → Redis TIME), as for consume.
-- ARGV[2]  the time of the charge: the `now` that the reserve call returned (same node, same clock).
-- ARGV[3 + 5(i−1) …] per key: algorithm, limit, periodMs, cost, charged `a` (what consume returned).
-- Reply    how many buckets were refunded.

local now = clock_ms(ARGV[1])
local charged_at = tonumber(ARGV[2])
local refunded = 0

for i = 1, #KEYS do
  local base = 3 + (i - 1) * 5
  local algorithm = ARGV[base]
  local limit, period, cost = tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3])
  local charged_a = tonumber(ARGV[base + 4])
  local sa, sb, sc = read_state(KEYS[i])

  if algorithm == 'fixed-window' then
    -- Same window: counts are additive, so removing our cost is exactly the state without our request.
    -- Another window: our charge no longer weighs anything; nothing to give back.
    if sa == charged_a and sb >= cost then
      write_state(KEYS[i], sa, sb - cost, sc, sa + period)
      refunded = refunded + 1
    end
  elseif algorithm == 'sliding-window' then
    -- Our cost sits in the current count, or in the previous one if the window has rolled over since.
    if sa == charged_a and sb >= cost then
      write_state(KEYS[i], sa, sb - cost, sc, sa + 2 * period)
      refunded = refunded + 1
    elseif sa == charged_a + period and sc >= cost then
      write_state(KEYS[i], sa, sb, sc - cost, sa + 2 * period)
      refunded = refunded + 1
    end
  elseif algorithm == 'token-bucket' then
    -- GCRA is not additive: an admitted request that found the bucket full (TAT ≤ its now) clamped
    -- the TAT to its own time, and the reservation's weight was then partly absorbed. Giving back all
    -- of cost·T could leave the TAT below what the admitted requests alone would have produced. What
    -- is safe: the reservation's weight decays by at most the time elapsed since it was made, so
    -- cost·T − elapsed is always still in the TAT (proof sketch: TAT ≥ max(TAT of admitted requests,
    -- now) + Σ over reservations in flight of max(0, cost·T − their age) holds after every charge,
    -- refund and instant). Exact when refunded at the charge's own instant (scripted tests); otherwise
    -- the round trip's worth of µs stays charged, which is negligible under-admission.
    -- An absent key (reset, or expired: then the charge has fully decayed anyway) gets nothing back.
    if sa > 0 then
      local give = cost * emission_interval_us(limit, period) - (now - charged_at) * 1000
      if give > 0 then
        local tat = sa - give
        write_state(KEYS[i], tat, 0, 0, ceil(tat / 1000))
        refunded = refunded + 1
      end
    end
  end
end
return refunded

-- stock_lib.lua: shared by the stock scripts. Every stock script touches
-- the keys of one segment only — its hash (KEYS[1]), its ledger (KEYS[2]:
-- entry id -> "qty:deadline_ms:user", deadline 0 when confirmed) and its
-- reservation deadlines (KEYS[3], a sorted set) — which share one hash tag,
-- so segments of one SKU may live in different Cluster slots.
-- The clock is the server's (TIME): every client agrees on expiry.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

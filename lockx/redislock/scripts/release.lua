-- Release by owner, or withdrawal of owner from the fair queue.
-- KEYS: lock L only; Q, D and W are derived from it as in acquire.lua
-- ARGV: owner (encoded), tombstone ms (0: none), wake-up channel prefix
-- Returns 1 if owner held the lock and released it, else 0 (after removing
-- owner from the queue if it waited there). A live fair-queue head is handed
-- the lock by this script (see wake in queue.lua).
local lk, owner = KEYS[1], ARGV[1]
local q, w = lk .. ':q', lk .. ':w' -- the queue data key (lk .. ':qd') only where it is read
local v = redis.call('GET', lk)
local holder = false
if v and #v > 8 then holder = string.sub(v, 1, -9) end
if holder ~= owner then
  withdraw(lk, owner, v, ARGV[3])
  return 0
end
-- Released by its holder: without waiters (no Q, no W), the common case, this
-- is three server commands: GET, EXISTS and SET (the tombstone).
local tomb = tonumber(ARGV[2])
local tok = string.sub(v, -8)
local woke = false
if redis.call('EXISTS', q, w) > 0 then woke = wake(lk, q, lk .. ':qd', w, ARGV[3], token_of(v)) end
if woke == 2 then
  -- Handed to the queue head: wake wrote the lock for it.
elseif woke then
  -- An older backend's head was woken: keep the token while the queue lives.
  redis.call('SET', lk, tok, 'PX', math.max(tomb, redis.call('PTTL', q)))
elseif tomb > 0 then
  -- Leave a tombstone, the token alone, so that the next grant issues a
  -- larger one even if the server clock has not moved past it. Its TTL goes
  -- to SET as it came (ARGV[2]): a Lua number would be formatted anew.
  redis.call('SET', lk, tok, 'PX', ARGV[2])
else
  redis.call('DEL', lk)
end
return 1

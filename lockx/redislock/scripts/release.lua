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
free_held(lk, v, redis.call('EXISTS', q, w) > 0, ARGV[2], ARGV[3])
return 1

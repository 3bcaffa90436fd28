-- Pass a non-fair wake-up on: the backend it reached has no waiter left for
-- the key (the waiter gave up or was served another way).
-- KEYS: lock L, queue order Q, queue data D, waiter marks W
-- ARGV: wake-up channel prefix
-- Returns 1 if another waiter was woken (or a queue head handed the lock).
local lk, q, d, w = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local v = redis.call('GET', lk)
if v and #v > 8 then return 0 end -- held: its release will wake the next
if redis.call('SCARD', w) == 0 and redis.call('EXISTS', q) == 0 then return 0 end
local prev = nil
if v and #v == 8 then prev = token_of(v) end
wake(lk, q, d, w, ARGV[1], prev)
return 1

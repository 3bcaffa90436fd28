-- Return of a holder's permits, or withdrawal from the queue.
-- KEYS: H, S, Q, D. ARGV: owner, wake-up channel prefix, watched key.
-- Returns 1 if owner held permits and returned them, else 0. The queued
-- owners that now fit are handed permits by this script (sem_wake).
local h, s, q, d, owner = KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1]
local us = now_us()
local now = math.floor(us / 1000)
local used = sem_purge(h, s, now)
local held = 0
local left = sem_return(h, s, owner, used)
if left then
  used, held = left, 1
end
local withdrew = q_del(q, d, owner)
if held == 1 or withdrew then sem_wake(h, s, q, d, us, used, ARGV[2], ARGV[3], true) end
sem_keep(h, s, q, now)
return held

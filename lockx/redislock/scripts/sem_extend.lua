-- Lease renewal of a semaphore holder.
-- KEYS: H, S, Q, D. ARGV: owner, lease ms.
-- Returns 1 if owner holds permits (lease reset), else 0.
local h, s, q, owner = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local us = now_us()
local now = math.floor(us / 1000)
sem_purge(h, s, now)
if not redis.call('ZSCORE', s, owner) then return 0 end
redis.call('ZADD', s, 'XX', lease_end(us, tonumber(ARGV[2])), owner)
sem_keep(h, s, q, now)
return 1

-- Return of a holder's permits, or withdrawal from the queue.
-- KEYS: H, S, Q, D. ARGV: owner, wake-up channel prefix, watched key.
-- Returns 1 if owner held permits and returned them, else 0.
local h, s, q, d, owner = KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1]
local now = math.floor(now_us() / 1000)
local used = sem_purge(h, s, now)
local held = 0
if redis.call('ZREM', s, owner) == 1 then
  used = used - (tonumber(redis.call('HGET', h, 'n:' .. owner)) or 0)
  if used < 0 then used = 0 end
  redis.call('HDEL', h, 'n:' .. owner, 'k:' .. owner)
  redis.call('HSET', h, 'u', used)
  held = 1
end
local withdrew = q_del(q, d, owner)
if held == 1 or withdrew then sem_wake(h, q, d, now, used, ARGV[2], ARGV[3], true) end
sem_keep(h, s, q, now)
return held

-- A semaphore's usage. KEYS: H, S, Q, D.
-- Returns {permits in use, holders, live queued waiters}.
local h, s, q, d = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now = math.floor(now_us() / 1000)
local used = sem_purge(h, s, now)
local waiting = 0
q_scan(q, d, now, function()
  waiting = waiting + 1
  return false
end)
sem_keep(h, s, q, now)
return {used, redis.call('ZCARD', s), waiting}

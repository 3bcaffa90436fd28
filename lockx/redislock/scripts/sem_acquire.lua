-- One attempt to take permits of a semaphore.
-- KEYS: H, S, Q, D (see sem_lib.lua)
-- ARGV: owner, lease ms, flags (1 fair, 2 wait), queue TTL ms, backend id,
--       limit, count, wake-up channel prefix, watched key
-- Returns {1, token} for a grant, {0, the soonest lease end in ms} for a
-- refusal.
local h, s, q, d, owner = KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1]
local lease, flags = tonumber(ARGV[2]), tonumber(ARGV[3])
local fair, wait = flags % 2 == 1, flags >= 2
local limit, count = tonumber(ARGV[6]), tonumber(ARGV[7])
local us = now_us()
local now = math.floor(us / 1000)
local used = sem_purge(h, s, now)
if redis.call('ZSCORE', s, owner) then -- idempotent per owner
  redis.call('ZADD', s, lease_end(us, lease), owner)
  sem_keep(h, s, q, now)
  return {1, tonumber(redis.call('HGET', h, 'k:' .. owner))}
end
-- First come, first served: the requests queued ahead count as taken, so a
-- large request is never overtaken, while the whole prefix of the queue that
-- fits is granted at once rather than one head at a time.
local need = used + count
if fair then
  q_scan(q, d, now, function(m, v)
    if m == owner then return true end
    need = need + tonumber(string.match(v, '^%d+:(%d+):'))
    return need > limit
  end)
end
local fits = need <= limit
if not fits then
  if wait then
    if fair then
      q_put(q, d, owner, count .. ':' .. limit .. ':' .. ARGV[5], us, now, tonumber(ARGV[4]))
    else
      redis.call('HSET', h, 'm:' .. ARGV[5], '1')
    end
  end
  local ttl = 0
  local low = redis.call('ZRANGE', s, 0, 0, 'WITHSCORES')
  if low[2] then ttl = tonumber(low[2]) - now end
  sem_keep(h, s, q, now)
  return {0, ttl}
end
q_del(q, d, owner)
local tok = next_token(tonumber(redis.call('HGET', h, 't')), us)
local t = string.format('%d', tok)
used = used + count
redis.call('HSET', h, 't', t, 'u', used, 'n:' .. owner, count, 'k:' .. owner, t)
redis.call('ZADD', s, lease_end(us, lease), owner)
sem_wake(h, q, d, now, used, ARGV[8], ARGV[9], false) -- the next in line may fit too
sem_keep(h, s, q, now)
return {1, tok}

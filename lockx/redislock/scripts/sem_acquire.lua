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
local back = false -- permits handed over under a larger limit, given back
if redis.call('ZSCORE', s, owner) then
  -- Idempotent per owner. Permits a release handed over (sem_wake) that
  -- their owner has not taken up yet were granted under the limit of its
  -- queue entry; this attempt carries the owner's current limit, which
  -- must hold too (a lowered limit stops new grants): if it does not, the
  -- permits go back and the owner waits again, first in line.
  if not (redis.call('HDEL', h, 'h:' .. owner) == 1 and used > limit) then
    redis.call('ZADD', s, lease_end(us, lease), owner)
    sem_keep(h, s, q, now)
    return {1, tonumber(redis.call('HGET', h, 'k:' .. owner))}
  end
  used = sem_return(h, s, owner, used)
  back = true
end
-- First come, first served: the requests queued ahead count as taken, so a
-- large request is never overtaken, while the whole prefix of the queue that
-- fits is granted at once rather than one head at a time. (The scan can
-- only add to need: it is skipped when the request does not fit anyway.)
local need = used + count
if fair and not back and need <= limit then
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
      -- The entry keeps the lease a release hands permits over with
      -- (sem_wake): the one asked for, but at most the queue TTL, so that a
      -- waiter that crashed holds them no longer than its entry would have
      -- lived; the core renews a shorter handoff to the full lease.
      local qttl = tonumber(ARGV[4])
      q_put(q, d, owner, string.format('%d:%d:%d:%s', count, limit, math.min(lease, qttl), ARGV[5]), us, now, qttl, back)
    else
      redis.call('HSET', h, 'm:' .. ARGV[5], '1')
    end
  end
  -- Permits given back may fit the next in line, or a marked waiter.
  if back then sem_wake(h, s, q, d, us, used, ARGV[8], ARGV[9], true) end
  local ttl = 0
  local low = redis.call('ZRANGE', s, 0, 0, 'WITHSCORES')
  if low[2] then ttl = tonumber(low[2]) - now end
  sem_keep(h, s, q, now)
  return {0, ttl}
end
q_del(q, d, owner)
local t = sem_grant(h, s, owner, count, used, us, lease, false)
sem_wake(h, s, q, d, us, used + count, ARGV[8], ARGV[9], false) -- the next in line may fit too
sem_keep(h, s, q, now)
return {1, tonumber(t)}

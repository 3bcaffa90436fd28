-- Shared by the sem_*.lua scripts (prepended after pattern_queue.lua).
--
-- A semaphore is four keys in the semaphore key's hash slot:
--   H  HASH  'u' permits in use, 't' the latest token, "n:<owner>" and
--            "k:<owner>" a holder's permit count and token, and
--            "m:<backend id>" marks of waiters that do not queue (non-fair)
--   S  ZSET  holder owner -> its lease end (ms): a crashed holder's permits
--            come back when its lease ends
--   Q, D     the queue; D values are "<deadline ms>:<count>:<limit>:<backend id>"
-- H and S live as long as the longest lease or the queue.

-- sem_purge returns the permits of expired leases and the permits in use.
local function sem_purge(h, s, now)
  local gone = redis.call('ZRANGEBYSCORE', s, '-inf', now)
  local used = tonumber(redis.call('HGET', h, 'u')) or 0
  if #gone > 0 then
    for _, o in ipairs(gone) do
      used = used - (tonumber(redis.call('HGET', h, 'n:' .. o)) or 0)
      redis.call('HDEL', h, 'n:' .. o, 'k:' .. o)
    end
    redis.call('ZREMRANGEBYSCORE', s, '-inf', now)
    if used < 0 then used = 0 end
    redis.call('HSET', h, 'u', used)
  end
  return used
end

-- sem_keep sets H and S to expire with the longest lease or the queue, or
-- deletes them when nothing is left.
local function sem_keep(h, s, q, now)
  local keep = redis.call('PTTL', q)
  local top = redis.call('ZRANGE', s, -1, -1, 'WITHSCORES')
  if top[2] and tonumber(top[2]) - now > keep then keep = tonumber(top[2]) - now end
  if keep <= 0 then
    redis.call('DEL', h, s)
    return
  end
  redis.call('PEXPIRE', h, keep)
  if redis.call('EXISTS', s) == 1 then redis.call('PEXPIRE', s, keep) end
end

-- sem_wake wakes the queued owners whose requests fit, in queue order, up
-- to the first that does not; with no one queued and permits returned
-- (released), every marked waiter.
local function sem_wake(h, q, d, now, used, chan, lk, released)
  local any = false
  q_scan(q, d, now, function(owner, v)
    any = true
    local cnt, lim, id = string.match(v, '^%d+:(%d+):(%d+):(.*)$')
    cnt, lim = tonumber(cnt), tonumber(lim)
    if used + cnt > lim then return true end
    used = used + cnt
    redis.call('PUBLISH', chan .. id, wake_msg(owner, lk))
    return false
  end)
  if released and not any then wake_marks(h, chan, lk) end
end

-- Shared by the rw_*.lua scripts (prepended after pattern_queue.lua).
--
-- A read/write lock is four keys in the lock key's hash slot:
--   H  HASH  'w' writer owner, 'x' its lease end (ms), 't' the key's token
--            (the latest write's, or the first reader's), and "m:<backend id>"
--            marks of waiting readers that do not queue (reader preference)
--   R  ZSET  reader owner -> its lease end (ms): one lease per reader, so a
--            crashed reader's hold ends on its own
--   Q, D     the queue; D values are "<deadline ms>:<r|w>:<backend id>"
-- H and R live as long as the longest lease or queue entry.

-- rw_purge drops the expired writer and readers and returns the writer.
local function rw_purge(h, r, now)
  local w = redis.call('HMGET', h, 'w', 'x')
  if w[1] and tonumber(w[2]) <= now then
    redis.call('HDEL', h, 'w', 'x')
    w[1] = false
  end
  redis.call('ZREMRANGEBYSCORE', r, '-inf', now)
  return w[1]
end

-- rw_keep sets H and R to expire with the longest lease or the queue, or
-- deletes them when nothing is left.
local function rw_keep(h, r, q, now)
  local keep = 0
  local x = tonumber(redis.call('HGET', h, 'x'))
  if x then keep = x - now end
  local top = redis.call('ZRANGE', r, -1, -1, 'WITHSCORES')
  if top[2] and tonumber(top[2]) - now > keep then keep = tonumber(top[2]) - now end
  local qk = redis.call('PTTL', q)
  if qk > keep then keep = qk end
  if keep <= 0 then
    redis.call('DEL', h, r)
    return
  end
  redis.call('PEXPIRE', h, keep)
  if redis.call('EXISTS', r) == 1 then redis.call('PEXPIRE', r, keep) end
end

-- rw_wake wakes the waiters that may now be granted: the readers queued
-- before the first queued writer, or that writer if no one holds the key;
-- with no writer queued, also every marked (non-queued) waiter.
local function rw_wake(h, r, q, d, now, writer, chan, lk)
  if writer then return end
  local readers = redis.call('ZCARD', r)
  local woke, stopped = false, false
  q_scan(q, d, now, function(owner, v)
    local mode, id = string.match(v, '^%d+:(%a):(.*)$')
    if mode == 'w' then
      if readers == 0 and not woke then
        redis.call('PUBLISH', chan .. id, wake_msg(owner, lk))
      end
      stopped = true
      return true
    end
    redis.call('PUBLISH', chan .. id, wake_msg(owner, lk))
    woke = true
    return false
  end)
  if not stopped then wake_marks(h, chan, lk) end
end

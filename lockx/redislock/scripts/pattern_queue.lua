-- Shared by the read/write lock and semaphore scripts (prepended after
-- queue.lua, whose now_us, live, queue_head, q_put and wake_msg they use).
--
-- Their queues have the shape of a lock's fair queue: Q, a ZSET of owners
-- scored by arrival (server µs, strictly increasing), and D, a HASH of
-- owner -> "<deadline ms>:<details>", where details end with the waiting
-- backend's id.

-- q_del removes owner from the queue and reports whether it was there.
local function q_del(q, d, owner)
  redis.call('ZREM', q, owner)
  return redis.call('HDEL', d, owner) == 1
end

-- q_scan calls fn(owner, value) for the live entries in arrival order until
-- fn returns true, dropping the expired entries (crashed waiters) it passes.
-- It reads the queue a page at a time from the last score seen, as most
-- scans stop at the head and fn may take the entry it is given off the queue.
local function q_scan(q, d, now, fn)
  local from = '-inf'
  while true do
    local page = redis.call('ZRANGEBYSCORE', q, from, '+inf', 'WITHSCORES', 'LIMIT', 0, 8)
    for i = 1, #page, 2 do
      local m = page[i]
      local v = redis.call('HGET', d, m)
      if live(v, now) then
        if fn(m, v) then return end
      else
        redis.call('ZREM', q, m)
        redis.call('HDEL', d, m)
      end
    end
    if #page < 16 then return end
    from = '(' .. page[#page]
  end
end

-- wake_marks wakes every watcher of lk on each backend that left a
-- "m:<backend id>" mark in h (waiters that do not queue), and clears them.
local function wake_marks(h, chan, lk)
  local f = redis.call('HKEYS', h)
  local marks = {}
  for i = 1, #f do
    if string.sub(f[i], 1, 2) == 'm:' then marks[#marks + 1] = f[i] end
  end
  if #marks == 0 then return end
  local msg = wake_msg('', lk)
  for i = 1, #marks do
    redis.call('PUBLISH', chan .. string.sub(marks[i], 3), msg)
  end
  redis.call('HDEL', h, unpack(marks))
end

-- lease_end is the end (server ms) of a lease of lease ms granted at server
-- time us (µs): rounded up, so that a lease never ends before it has run
-- its full length. (Ends are compared with the current ms rounded down: an
-- end at or before it has passed.)
local function lease_end(us, lease)
  return math.floor((us + 999) / 1000) + lease
end

-- next_token returns a fencing token above prev: the server clock in µs, or
-- prev + 1 if the clock has not moved past it.
local function next_token(prev, us)
  local tok = us
  if prev and prev >= tok then tok = prev + 1 end
  return tok
end

-- Shared by acquire.lua and release.lua (prepended when the scripts load).
--
-- A key's fair queue is two keys in the lock's hash slot:
--   Q  ZSET  member owner, score arrival time (server µs, strictly increasing)
--   D  HASH  owner -> "<deadline ms>:<backend id>"
-- An entry whose deadline has passed belongs to a waiter that stopped
-- refreshing its place (crashed); it is dropped when it reaches the head,
-- which is all that decides a grant. Q and D expire with their latest deadline.

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- queue_head drops expired entries from the head and returns the first live
-- owner and its D value, or false.
local function queue_head(q, d, now_ms)
  while true do
    local m = redis.call('ZRANGE', q, 0, 0)[1]
    if not m then return false end
    local v = redis.call('HGET', d, m)
    if v and tonumber(string.match(v, '^%d+')) > now_ms then return m, v end
    redis.call('ZREM', q, m)
    redis.call('HDEL', d, m)
  end
end

-- wake_msg is the pub/sub payload: "<len(owner)>:<owner><lock key>"; an empty
-- owner means "every watcher of the key".
local function wake_msg(owner, lk)
  return string.len(owner) .. ':' .. owner .. lk
end

-- wake tells the next waiter that lk may be free. With a live queue head
-- only the head's backend hears, naming the head; otherwise one backend,
-- popped from the waiter marks set w, hears (and wakes one of its waiters):
-- waking every waiter for one free lock is a thundering herd. The others keep
-- their marks for the next release; a backend with no waiter left passes the
-- wake-up on (wake_next.lua). It returns true if a queue head was woken.
local function wake(lk, q, d, w, chan)
  if redis.call('EXISTS', q) == 1 then
    local head, v = queue_head(q, d, math.floor(now_us() / 1000))
    if head then
      redis.call('PUBLISH', chan .. string.match(v, ':(.*)$'), wake_msg(head, lk))
      return true
    end
  end
  local id = redis.call('SPOP', w)
  if id then
    redis.call('PUBLISH', chan .. id, wake_msg('', lk))
  end
  return false
end

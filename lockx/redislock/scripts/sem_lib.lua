-- Shared by the sem_*.lua scripts (prepended after pattern_queue.lua).
--
-- A semaphore is four keys in the semaphore key's hash slot:
--   H  HASH  'u' permits in use, 't' the latest token, "n:<owner>" and
--            "k:<owner>" a holder's permit count and token, "h:<owner>"
--            permits handed over and not yet taken up (sem_wake), and
--            "m:<backend id>" marks of waiters that do not queue (non-fair)
--   S  ZSET  holder owner -> its lease end (ms): a crashed holder's permits
--            come back when its lease ends
--   Q, D     the queue; D values are
--            "<deadline ms>:<count>:<limit>:<lease ms>:<backend id>", the
--            lease being the one asked for capped at the queue TTL (entries
--            of older backends, without the lease, still parse: they are
--            woken, not handed permits)
-- H and S live as long as the longest lease or the queue.

-- sem_purge returns the permits of expired leases and the permits in use.
local function sem_purge(h, s, now)
  local gone = redis.call('ZRANGEBYSCORE', s, '-inf', now)
  local used = tonumber(redis.call('HGET', h, 'u')) or 0
  if #gone > 0 then
    for _, o in ipairs(gone) do
      used = used - (tonumber(redis.call('HGET', h, 'n:' .. o)) or 0)
      redis.call('HDEL', h, 'n:' .. o, 'k:' .. o, 'h:' .. o)
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
  redis.call('PEXPIRE', s, keep) -- a no-op while S does not exist
end

-- sem_grant gives owner count permits (used are in use besides) with a lease
-- of px ms from server time us (µs), and returns the new token as a string.
-- A grant handed over (sem_wake) is marked "h:<owner>" until its owner's
-- next attempt takes it up (sem_acquire.lua).
local function sem_grant(h, s, owner, count, used, us, px, handed)
  local t = string.format('%d', next_token(tonumber(redis.call('HGET', h, 't')), us))
  if handed then
    redis.call('HSET', h, 't', t, 'u', used + count, 'n:' .. owner, count, 'k:' .. owner, t, 'h:' .. owner, '1')
  else
    redis.call('HSET', h, 't', t, 'u', used + count, 'n:' .. owner, count, 'k:' .. owner, t)
  end
  redis.call('ZADD', s, lease_end(us, px), owner)
  return t
end

-- sem_return takes back owner's permits, of used in use, and returns the
-- permits still in use, or false if owner held none.
local function sem_return(h, s, owner, used)
  if redis.call('ZREM', s, owner) == 0 then return false end
  used = used - (tonumber(redis.call('HGET', h, 'n:' .. owner)) or 0)
  if used < 0 then used = 0 end
  redis.call('HDEL', h, 'n:' .. owner, 'k:' .. owner, 'h:' .. owner)
  redis.call('HSET', h, 'u', used)
  return used
end

-- sem_wake hands permits to the queued owners whose requests fit, in queue
-- order, up to the first that does not (a direct handoff, as wake in
-- queue.lua does for a lock): each is granted here with the lease its entry
-- keeps, taken off the queue, and its backend is sent
-- "+<token>:<lease ms>:" followed by the usual message naming it, which
-- answers its next attempt without a round trip ('+' where a lock's
-- handoff has '=': the backend keeps the two apart, handoff.go). An entry of an older
-- backend (no lease) is only woken. With no one queued and permits returned
-- (released), every marked waiter is woken. us is the server time (µs),
-- used the permits in use.
local function sem_wake(h, s, q, d, us, used, chan, lk, released)
  local any = false
  q_scan(q, d, math.floor(us / 1000), function(owner, v)
    any = true
    local cnt, lim, rest = string.match(v, '^%d+:(%d+):(%d+):(.*)$')
    cnt, lim = tonumber(cnt), tonumber(lim)
    if used + cnt > lim then return true end
    local px, id = string.match(rest, '^(%d+):(.*)$')
    if px then
      local t = sem_grant(h, s, owner, cnt, used, us, tonumber(px), true)
      q_del(q, d, owner)
      redis.call('PUBLISH', chan .. id, '+' .. t .. ':' .. px .. ':' .. wake_msg(owner, lk))
    else
      redis.call('PUBLISH', chan .. rest, wake_msg(owner, lk))
    end
    used = used + cnt
    return false
  end)
  if released and not any then wake_marks(h, chan, lk) end
end

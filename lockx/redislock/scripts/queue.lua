-- Shared by acquire.lua and release.lua (prepended when the scripts load,
-- after token.lua or token_struct.lua).
--
-- A key's fair queue is two keys in the lock's hash slot:
--   Q  ZSET  member owner, score arrival time (server µs, strictly increasing)
--   D  HASH  owner -> "<deadline ms>:<lease ms>:<backend id>", the lease
--            being the one asked for capped at the queue TTL (entries of
--            older backends, "<deadline ms>:<backend id>", still parse: their
--            head is woken, not handed the lock)
-- An entry whose deadline has passed belongs to a waiter that stopped
-- refreshing its place (crashed); it is dropped when it reaches the head,
-- which is all that decides a grant. Q and D live at least two thirds of
-- the longest queue TTL of a waiter past its latest attempt (keep_queue):
-- a queued waiter tries again within a third of its queue TTL, so they
-- outlive every waiter that is still there.

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- live reports whether the D value v (nil: no entry) is an entry whose
-- deadline has not passed at now_ms.
local function live(v, now_ms)
  return v and tonumber(string.match(v, '^%d+')) > now_ms
end

-- queue_head drops expired entries from the head and returns the first live
-- owner and its D value, or false.
local function queue_head(q, d, now_ms)
  while true do
    local m = redis.call('ZRANGE', q, 0, 0)[1]
    if not m then return false end
    local v = redis.call('HGET', d, m)
    if live(v, now_ms) then return m, v end
    redis.call('ZREM', q, m)
    redis.call('HDEL', d, m)
  end
end

-- keep_queue makes the fair queue's keys Q and D live for ttl ms from now
-- when less than two thirds of that is left, never shortening them (another
-- waiter may have asked for a longer queue TTL); fresh says this attempt
-- created them, so they have no TTL to read. A queued waiter tries again
-- within a third of its queue TTL (the core's pause), so the keys outlive
-- every waiter still there, and on a hot key only an attempt every third of
-- the TTL writes them: the others stop at the PTTL. (PEXPIRE's GT flag
-- would extend without the PTTL, but always with two commands.)
local function keep_queue(q, d, ttl, fresh)
  if fresh or redis.call('PTTL', q) < ttl - math.floor(ttl / 3) then
    redis.call('PEXPIRE', q, ttl)
    redis.call('PEXPIRE', d, ttl)
  end
end

-- q_put enqueues owner at the tail of the queue (at its head if front), or
-- refreshes its deadline and details in place: ZADD NX keeps the place of
-- an owner already queued (a retried attempt, a refresh), so no read of
-- its entry comes first. details end with the waiting backend's id; D
-- holds "<deadline ms>:<details>". us and now are the server clock in µs
-- and ms.
local function q_put(q, d, owner, details, us, now, qttl, front)
  local score = us
  local edge
  if front then
    edge = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
    if edge[2] then score = tonumber(edge[2]) - 1 end
  else
    edge = redis.call('ZRANGE', q, -1, -1, 'WITHSCORES')
    if edge[2] and tonumber(edge[2]) >= score then score = tonumber(edge[2]) + 1 end
  end
  redis.call('ZADD', q, 'NX', string.format('%d', score), owner)
  redis.call('HSET', d, owner, string.format('%d:', now + qttl) .. details)
  keep_queue(q, d, qttl, not edge[2])
end

-- wake_msg is the pub/sub payload: "<len(owner)>:<owner><lock key>"; an empty
-- owner means "every watcher of the key".
local function wake_msg(owner, lk)
  return string.len(owner) .. ':' .. owner .. lk
end

-- put_lock writes lk for owner with a fencing token one past prev (the key's
-- previous token, or nil) or the server clock in µs now, whichever is
-- larger (one of them may be nil), and a lease of px ms. It returns the
-- token, or nil above 2^53.
local function put_lock(lk, owner, prev, now, px)
  local tok = now
  if prev and (not now or prev >= now) then tok = prev + 1 end
  if tok > 9007199254740991 then return nil end
  redis.call('SET', lk, owner .. token_bytes(tok), 'PX', px)
  return tok
end

-- wake tells the next waiter that lk is free. With a live queue head the
-- lock goes to the head directly (a fair handoff): the script writes the
-- lock for it with the lease its last attempt asked for, takes it off the
-- queue and publishes "=<token>:<lease ms>:" followed by the usual message
-- to the head's backend only, which answers the head's next attempt without
-- a round trip. A head queued by an older backend (no lease in its entry) is
-- only woken, naming it. Without a queue head one backend, popped from the
-- waiter marks set w, hears (and wakes one of its waiters): waking every
-- waiter for one free lock is a thundering herd. The others keep their marks
-- for the next release; a backend with no waiter left passes the wake-up on
-- (wake_next.lua). prev is the key's last token (nil if unknown); lk must be
-- free. It returns 2 if the lock was handed to the head, 1 if a head was
-- woken, false otherwise.
local function wake(lk, q, d, w, chan, prev)
  -- The queue's head is popped at once: ZPOPMIN answers whether a queue
  -- exists and takes the head off it in one command, and the clock is read
  -- only when there is one. Expired heads (crashed waiters) stay off.
  local p = redis.call('ZPOPMIN', q)
  if p[1] then
    local now = now_us()
    local now_ms = math.floor(now / 1000)
    while p[1] do
      local head = p[1]
      local v = redis.call('HGET', d, head)
      if live(v, now_ms) then
        local px, id = string.match(v, '^%d+:(%d+):(.*)$')
        if px then
          local tok = put_lock(lk, head, prev, now, px)
          if tok then
            redis.call('HDEL', d, head)
            redis.call('PUBLISH', chan .. id, '=' .. string.format('%d', tok) .. ':' .. px .. ':' .. wake_msg(head, lk))
            return 2
          end
        end
        -- Not handed over: the head goes back to its place and is woken.
        redis.call('ZADD', q, p[2], head)
        redis.call('PUBLISH', chan .. string.match(v, '^%d+:(.*)$'), wake_msg(head, lk))
        return 1
      end
      redis.call('HDEL', d, head)
      p = redis.call('ZPOPMIN', q)
    end
  end
  local id = redis.call('SPOP', w)
  if id then
    redis.call('PUBLISH', chan .. id, wake_msg('', lk))
  end
  return false
end

-- withdraw takes owner, which does not hold lk (v is lk's value), off the
-- fair queue. If owner headed the queue of a free lock, the next in line may
-- take it now.
local function withdraw(lk, owner, v, chan)
  local q, d = lk .. ':q', lk .. ':qd'
  if redis.call('HEXISTS', d, owner) == 0 then return end
  local head = queue_head(q, d, math.floor(now_us() / 1000))
  redis.call('ZREM', q, owner)
  redis.call('HDEL', d, owner)
  if head == owner and not (v and #v > 8) then
    local prev = nil
    if v and #v == 8 then prev = token_of(v) end
    wake(lk, q, d, lk .. ':w', chan, prev)
  end
end

-- free_held ends the hold whose value v (the holder's owner, then its token)
-- lk has: a live fair-queue head is handed the lock (see wake), else the
-- token stays behind as a tombstone. waiting says that Q or W exists. tomb
-- is the tombstone's TTL in ms ("0": none) as it came in ARGV: a Lua number
-- would be formatted anew. release.lua and pass.lua share it.
local function free_held(lk, v, waiting, tomb, chan)
  local tok = string.sub(v, -8)
  local woke = false
  if waiting then woke = wake(lk, lk .. ':q', lk .. ':qd', lk .. ':w', chan, token_of(v)) end
  if woke == 2 then
    -- Handed to the queue head: wake wrote the lock for it.
  elseif woke then
    -- An older backend's head was woken: keep the token while the queue lives.
    redis.call('SET', lk, tok, 'PX', math.max(tonumber(tomb), redis.call('PTTL', lk .. ':q')))
  elseif tonumber(tomb) > 0 then
    -- Leave a tombstone, the token alone, so that the next grant issues a
    -- larger one even if the server clock has not moved past it.
    redis.call('SET', lk, tok, 'PX', tomb)
  else
    redis.call('DEL', lk)
  end
end

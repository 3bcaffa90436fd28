-- One acquisition attempt.
-- KEYS: lock L only; its queue order Q, queue data D and waiter marks W are
-- L with ":q", ":qd" and ":w" appended (Backend.keys), so they share L's hash
-- tag and Cluster slot. Each declared key costs the server about 0.3 µs per
-- call, more than any command this script runs (docs/architecture.md,
-- "Scripts"), so this hot script derives them.
-- ARGV: owner (encoded), lease ms, flags (1 fair, 2 wait, 4 other waiters of
--       this backend wait for the key too, 8 a Quorum's node: the token from
--       the clock and the queue looked for even over a tombstone), queue TTL
--       ms, backend id (the last two only when waiting)
-- L is a string: the holder's encoded owner followed by the fencing token as
-- an 8-byte big-endian integer (below 2^53, so exact in a Lua number); a
-- tombstone is the token alone (token.lua reads and writes the token).
-- Returns the token (> 0) of a grant, or -1 - the holder's remaining lease in
-- ms (0 when no one holds the key) of a refusal.
--
-- An uncontended grant, the common case, is two server commands over the
-- tombstone of the key's last release: GET and SET. A key without one
-- (never locked, or idle past the tombstone window) takes four: GET, EXISTS
-- (no fair queue), TIME and SET.
local lk, owner = KEYS[1], ARGV[1]
local q = lk .. ':q'
local d -- the queue data key (lk .. ':qd'), named only where the queue is read
local v = redis.call('GET', lk)
local holder, prev = false, nil
if v and #v >= 8 then
  prev = token_of(v)
  if #v > 8 then
    holder = string.sub(v, 1, -9)
    if holder == owner then
      -- Idempotent per owner: a retry after a lost reply gets the same grant.
      redis.call('PEXPIRE', lk, ARGV[2])
      return prev
    end
  end
end
local flags = tonumber(ARGV[3])
local fair, wait, others, clock = flags % 2 == 1, flags % 4 >= 2, flags % 8 >= 4, flags >= 8
-- The server clock (µs, and ms), read only where it is needed: the queue,
-- and the token of a key without a previous one.
local now, now_ms
local free, first = not holder, false
-- A key with a tombstone has no live fair queue (acquire_many.lua says why),
-- so the queue is looked for only at a key without a value — or on a
-- Quorum's node (the clock flag), where a yield leaves a tombstone while
-- its queue lives.
if free and (clock or not prev) and redis.call('EXISTS', q) == 1 then
  d = lk .. ':qd'
  now = now_us()
  now_ms = math.floor(now / 1000)
  -- Fair waiters go first: only the head of the queue may take a free lock,
  -- and only with a fair attempt.
  first = queue_head(q, d, now_ms)
  if first and not (fair and first == owner) then free = false end
end
if free then
  if first then
    redis.call('ZREM', q, owner)
    redis.call('HDEL', d, owner)
  end
  -- The token is one past the key's previous token (its tombstone), or the
  -- server clock in µs if it has none: tokens never run ahead of the clock
  -- (each grant takes more than a µs), so the clock takes over above every
  -- earlier token once the tombstone lapses. With the clock flag (a
  -- quorum compares the tokens of different nodes) or a clock read
  -- already, it is the larger of the two.
  if not now and (clock or not prev) then now = now_us() end
  local tok = put_lock(lk, owner, prev, now, ARGV[2])
  if not tok then
    return redis.error_reply('ERR redislock: fencing token above 2^53')
  end
  if others then
    -- The wake-up that brought us here popped this backend's mark; its other
    -- waiters still want the next release.
    local w = lk .. ':w'
    redis.call('SADD', w, ARGV[5])
    local keep = tonumber(ARGV[2]) + 1000
    if redis.call('PTTL', w) < keep then redis.call('PEXPIRE', w, keep) end
  end
  return tok
end
local ttl = 0
if holder then
  ttl = redis.call('PTTL', lk)
  if ttl < 0 then ttl = 0 end
end
if wait then
  if fair then
    -- Enqueue, or refresh the deadline of a queued entry in place. The
    -- entry keeps the lease a release hands the lock to the head with
    -- (wake in queue.lua): the one asked for, but at most the queue TTL, so
    -- that a head that crashed holds the queue up no longer than its entry
    -- would have; the core renews a shorter handoff to the full lease.
    d = d or lk .. ':qd'
    if not now then
      now = now_us()
      now_ms = math.floor(now / 1000)
    end
    local qttl = tonumber(ARGV[4])
    q_put(q, d, owner, string.format('%d:%s', math.min(tonumber(ARGV[2]), qttl), ARGV[5]), now, now_ms, qttl)
  else
    -- Mark this backend as waiting, so a release wakes it. The mark outlives
    -- the lease (or, while fair waiters hold the key up, the queue) a little;
    -- a waiter retries before then anyway and marks again.
    local w = lk .. ':w'
    redis.call('SADD', w, ARGV[5])
    local keep = math.max(redis.call('PTTL', lk), redis.call('PTTL', q)) + 1000
    if redis.call('PTTL', w) < keep then redis.call('PEXPIRE', w, keep) end
  end
end
return -1 - ttl

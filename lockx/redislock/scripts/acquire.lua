-- One acquisition attempt.
-- KEYS: lock hash, queue order (Q), queue data (D)
-- ARGV: owner, lease ms, flags (1 fair, 2 wait), queue TTL ms, backend id
-- Returns the fencing token (> 0) of a grant, or -1 - the holder's remaining
-- lease in ms (0 when no one holds the key) of a refusal.
local lk, q, d, owner = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local h = redis.call('HMGET', lk, 'o', 't')
if h[1] == owner then
  -- Idempotent per owner: a retry after a lost reply gets the same grant.
  redis.call('PEXPIRE', lk, ARGV[2])
  return tonumber(h[2])
end
local flags = tonumber(ARGV[3])
local fair, wait = flags % 2 == 1, flags >= 2
local now = now_us()
local now_ms = math.floor(now / 1000)
local free, first = not h[1], false
if free and redis.call('EXISTS', q) == 1 then
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
  -- The token is the server clock in µs, or one past the key's previous token
  -- (live or tombstone) if the clock has not moved past it.
  local tok = now
  local prev = tonumber(h[2])
  if prev and prev >= tok then tok = prev + 1 end
  if tok > 9007199254740991 then
    return redis.error_reply('ERR redislock: fencing token above 2^53')
  end
  redis.call('HSET', lk, 'o', owner, 't', string.format('%d', tok))
  redis.call('PEXPIRE', lk, ARGV[2])
  return tok
end
local ttl = 0
if h[1] then
  ttl = redis.call('PTTL', lk)
  if ttl < 0 then ttl = 0 end
end
if wait then
  if fair then
    -- Enqueue, or refresh the deadline of a live entry in place.
    local qttl = tonumber(ARGV[4])
    local v = redis.call('HGET', d, owner)
    if not (v and tonumber(string.match(v, '^%d+')) > now_ms and redis.call('ZSCORE', q, owner)) then
      local score = now
      local tail = redis.call('ZRANGE', q, -1, -1, 'WITHSCORES')
      if tail[2] and tonumber(tail[2]) >= score then score = tonumber(tail[2]) + 1 end
      redis.call('ZADD', q, string.format('%d', score), owner)
    end
    redis.call('HSET', d, owner, string.format('%d:%s', now_ms + qttl, ARGV[5]))
    if redis.call('PTTL', q) < qttl then
      redis.call('PEXPIRE', q, qttl)
      redis.call('PEXPIRE', d, qttl)
    end
  else
    -- Mark this backend as waiting, so a release wakes it.
    redis.call('HSET', lk, 'w:' .. ARGV[5], '1')
    if not h[1] then
      -- The key is free but fair waiters are queued: keep the mark (and the
      -- previous token) as long as the queue lives.
      local keep = redis.call('PTTL', q)
      if redis.call('PTTL', lk) < keep then redis.call('PEXPIRE', lk, keep) end
    end
  end
end
return -1 - ttl

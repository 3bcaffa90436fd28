-- One attempt at the read or write side of a read/write lock.
-- KEYS: H, R, Q, D (see rw_lib.lua)
-- ARGV: owner, lease ms, mode ('r' or 'w'), flags (1 fair, 2 wait),
--       queue TTL ms, backend id
-- Returns {1, token} for a grant, {0, the blocker's remaining lease ms} for a
-- refusal, {2} when an owner holding the read side asks for the write side.
local h, r, q, d, owner = KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1]
local lease, mode, flags = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local fair, wait = flags % 2 == 1, flags >= 2
local us = now_us()
local now = math.floor(us / 1000)
local writer = rw_purge(h, r, now)

local function refuse(queue)
  local ttl = 0
  if writer then
    ttl = tonumber(redis.call('HGET', h, 'x')) - now
  else
    local low = redis.call('ZRANGE', r, 0, 0, 'WITHSCORES')
    if low[2] then ttl = tonumber(low[2]) - now end
  end
  if wait then
    if queue then
      q_put(q, d, owner, mode .. ':' .. ARGV[6], us, now, tonumber(ARGV[5]))
    else
      redis.call('HSET', h, 'm:' .. ARGV[6], '1')
    end
  end
  rw_keep(h, r, q, now)
  return {0, ttl}
end

local function grant(tok)
  q_del(q, d, owner)
  rw_keep(h, r, q, now)
  return {1, tok}
end

if mode == 'w' then
  if writer == owner then -- idempotent per owner
    redis.call('HSET', h, 'x', lease_end(us, lease))
    return grant(tonumber(redis.call('HGET', h, 't')))
  end
  if redis.call('ZSCORE', r, owner) then return {2} end
  local free = not writer and redis.call('ZCARD', r) == 0
  if free then
    local head = queue_head(q, d, now)
    if head and head ~= owner then free = false end
  end
  if not free then return refuse(true) end
  local tok = next_token(tonumber(redis.call('HGET', h, 't')), us)
  redis.call('HSET', h, 'w', owner, 'x', lease_end(us, lease), 't', string.format('%d', tok))
  return grant(tok)
end

if redis.call('ZSCORE', r, owner) then -- idempotent per owner
  redis.call('ZADD', r, lease_end(us, lease), owner)
  return grant(tonumber(redis.call('HGET', h, 't')))
end
local blocked = writer and writer ~= owner
if not blocked and fair and writer ~= owner then
  -- Writer preference: a writer queued ahead of us goes first.
  q_scan(q, d, now, function(m, v)
    if m == owner then return true end
    if string.match(v, '^%d+:(%a)') == 'w' then
      blocked = true
      return true
    end
    return false
  end)
end
if blocked then return refuse(fair) end
local tok = tonumber(redis.call('HGET', h, 't'))
if not tok then
  tok = us
  redis.call('HSET', h, 't', string.format('%d', tok))
end
redis.call('ZADD', r, lease_end(us, lease), owner)
return grant(tok)

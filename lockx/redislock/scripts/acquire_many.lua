-- One all-or-nothing attempt at several locks for one owner: no waiting, not
-- fair (AcquireMany; waiting and fairness stay with the Client).
-- KEYS: lock L, queue order Q and queue data D of each key, in that order
-- ARGV: owner (encoded), then the lease in ms of each key, in key order
-- Every key is checked before anything is written, so the attempt is atomic:
-- if each key is free (or already held by owner, which re-grants it with the
-- same token, as acquire.lua does) every key is granted and the reply is its
-- token (> 0) per key; otherwise nothing is granted and the reply per key is
-- 0 if it could have been taken, or -1 - the holder's remaining lease in ms
-- (-1 for a free key that live fair waiters hold back for their head).
local owner, n = ARGV[1], #KEYS / 3
local prev, mine, out = {}, {}, {}
local refused, now = false, nil
for i = 1, n do
  local lk, q, d = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  local v = redis.call('GET', lk)
  local holder = false
  out[i] = 0
  if v and #v >= 8 then
    local p = 0
    for j = #v - 7, #v do p = p * 256 + string.byte(v, j) end
    if p >= 9007199254740991 then
      return redis.error_reply('ERR redislock: fencing token above 2^53')
    end
    prev[i] = p
    holder = string.sub(v, 1, -9)
    if holder == '' then holder = false end
  end
  if holder == owner then
    mine[i] = true
  elseif holder then
    local ttl = redis.call('PTTL', lk)
    if ttl < 0 then ttl = 0 end
    out[i], refused = -1 - ttl, true
  elseif redis.call('EXISTS', q) == 1 then
    now = now or now_us()
    if queue_head(q, d, math.floor(now / 1000)) then out[i], refused = -1, true end
  end
end
if refused then return out end
now = now or now_us()
for i = 1, n do
  local lk = KEYS[3 * i - 2]
  if mine[i] then
    redis.call('PEXPIRE', lk, ARGV[i + 1])
    out[i] = prev[i]
  else
    out[i] = put_lock(lk, owner, prev[i], now, ARGV[i + 1])
  end
end
return out

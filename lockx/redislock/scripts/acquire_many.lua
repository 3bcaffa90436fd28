-- One all-or-nothing attempt at several locks for one owner: no waiting, not
-- fair (AcquireMany; waiting and fairness stay with the Client).
-- KEYS: the lock L of each key; its queue order Q and queue data D are L with
-- ":q" and ":qd" appended, derived here as in acquire.lua (same hash tag)
-- ARGV: owner (encoded), then the lease in ms of each key, in key order, or
-- one lease for every key (the usual case: fewer arguments to send and parse)
-- Every key is checked before anything is written, so the attempt is atomic:
-- if each key is free (or already held by owner, which re-grants it with the
-- same token, as acquire.lua does) every key is granted and the reply is its
-- token (> 0) per key; otherwise nothing is granted and the reply per key is
-- 0 if it could have been taken, or -1 - the holder's remaining lease in ms
-- (-1 for a free key that live fair waiters hold back for their head).
-- The locks are read with one MGET and the queues checked with one EXISTS,
-- and keys granted in one go share the encoding of their token (the server
-- clock) unless a previous token pushes one past it: the script's cost is
-- one SET per key beyond a single acquire's.
local owner, n = ARGV[1], #KEYS
local one_lease = #ARGV == 2
local lks, qs = {}, {}
for i = 1, n do
  lks[i], qs[i] = KEYS[i], KEYS[i] .. ':q'
end
local vals = redis.call('MGET', unpack(lks))
local queued = redis.call('EXISTS', unpack(qs)) > 0
local prev, mine, out = {}, {}, {}
local refused, now = false, nil
for i = 1, n do
  local v, holder = vals[i], false
  out[i] = 0
  if v and #v >= 8 then
    local p = token_of(v)
    if p >= 9007199254740991 then
      return redis.error_reply('ERR redislock: fencing token above 2^53')
    end
    prev[i] = p
    if #v > 8 then holder = string.sub(v, 1, -9) end
  end
  if holder == owner then
    mine[i] = true
  elseif holder then
    local ttl = redis.call('PTTL', lks[i])
    if ttl < 0 then ttl = 0 end
    out[i], refused = -1 - ttl, true
  elseif queued and redis.call('EXISTS', qs[i]) == 1 then
    now = now or now_us()
    if queue_head(qs[i], lks[i] .. ':qd', math.floor(now / 1000)) then out[i], refused = -1, true end
  end
end
if refused then return out end
now = now or now_us()
local enc_tok, val = nil, nil
for i = 1, n do
  if mine[i] then
    redis.call('PEXPIRE', lks[i], one_lease and ARGV[2] or ARGV[i + 1])
    out[i] = prev[i]
  else
    local tok = now
    if prev[i] and prev[i] >= tok then tok = prev[i] + 1 end
    if tok ~= enc_tok then enc_tok, val = tok, owner .. token_bytes(tok) end
    redis.call('SET', lks[i], val, 'PX', one_lease and ARGV[2] or ARGV[i + 1])
    out[i] = tok
  end
end
return out

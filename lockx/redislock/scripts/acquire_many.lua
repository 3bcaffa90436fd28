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
-- The locks are read with one MGET, and keys granted in one go share the
-- encoding of their token (the server clock) unless a previous token pushes
-- one past it: the script's cost is one SET per key beyond a single
-- acquire's.
-- Fair queues are looked for (one EXISTS over all of them, then one per key
-- only if some exists) only at keys with no value at all. A key with a
-- tombstone has no live queue: a release leaves a tombstone only once the
-- queue is empty (with a live head it hands the lock over, and the lock is
-- then held), and no queue forms on a free key, since a fair waiter at a
-- free key without one takes it. The one exception is a head queued by a
-- backend from before the direct handoff (no lease in its entry), which a
-- release only wakes, keeping the tombstone while its queue lives: such a
-- head can lose the key to a set. A queue does outlive the lock when the
-- holder's lease runs out, and then the key has no value.
local owner, n = ARGV[1], #KEYS
local one_lease = #ARGV == 2
local vals = redis.call('MGET', unpack(KEYS))
local prev, mine, out, bare = {}, {}, {}, {}
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
    local ttl = redis.call('PTTL', KEYS[i])
    if ttl < 0 then ttl = 0 end
    out[i], refused = -1 - ttl, true
  elseif not prev[i] then
    bare[#bare + 1] = i
  end
end
if #bare > 0 then
  local qs = {}
  for j = 1, #bare do qs[j] = KEYS[bare[j]] .. ':q' end
  if redis.call('EXISTS', unpack(qs)) > 0 then
    for j = 1, #bare do
      if redis.call('EXISTS', qs[j]) == 1 then
        now = now or now_us()
        if queue_head(qs[j], KEYS[bare[j]] .. ':qd', math.floor(now / 1000)) then
          out[bare[j]], refused = -1, true
        end
      end
    end
  end
end
if refused then return out end
now = now or now_us()
local enc_tok, val = nil, nil
for i = 1, n do
  if mine[i] then
    redis.call('PEXPIRE', KEYS[i], one_lease and ARGV[2] or ARGV[i + 1])
    out[i] = prev[i]
  else
    local tok = now
    if prev[i] and prev[i] >= tok then tok = prev[i] + 1 end
    if tok ~= enc_tok then enc_tok, val = tok, owner .. token_bytes(tok) end
    redis.call('SET', KEYS[i], val, 'PX', one_lease and ARGV[2] or ARGV[i + 1])
    out[i] = tok
  end
end
return out

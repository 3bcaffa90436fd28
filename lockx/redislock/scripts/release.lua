-- Release by owner, or withdrawal of owner from the fair queue.
-- KEYS: lock hash, queue order (Q), queue data (D)
-- ARGV: owner, tombstone ms (0: none), wake-up channel prefix
-- Returns 1 if owner held the lock and released it, else 0 (after removing
-- owner from the queue if it waited there).
local lk, q, d, owner = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local f = redis.call('HGETALL', lk)
local holder, marks = false, {}
for i = 1, #f, 2 do
  local k = f[i]
  if k == 'o' then
    holder = f[i + 1]
  elseif string.byte(k, 1) == 119 then -- 'w': a waiting backend's mark
    marks[#marks + 1] = k
  end
end
if holder ~= owner then
  if redis.call('HEXISTS', d, owner) == 1 then
    local head = queue_head(q, d, math.floor(now_us() / 1000))
    redis.call('ZREM', q, owner)
    redis.call('HDEL', d, owner)
    -- The head gave up a free lock: the next in line may take it now.
    if head == owner and not holder then wake(lk, q, d, marks, ARGV[3]) end
  end
  return 0
end
local tomb = tonumber(ARGV[2])
if wake(lk, q, d, marks, ARGV[3]) then
  -- Handed to the queue: keep the token and other waiters' marks while it lives.
  redis.call('HDEL', lk, 'o')
  local keep = redis.call('PTTL', q)
  if keep < tomb then keep = tomb end
  redis.call('PEXPIRE', lk, keep)
elseif tomb > 0 then
  -- Leave a tombstone: the token alone, so the next grant issues a larger one
  -- even if the server clock has not moved past it.
  redis.call('HDEL', lk, 'o')
  redis.call('PEXPIRE', lk, tomb)
else
  redis.call('DEL', lk)
end
return 1

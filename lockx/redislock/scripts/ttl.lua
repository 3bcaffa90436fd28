-- KEYS: lock L. ARGV: owner (encoded).
-- Returns the remaining lease in ms if owner holds the lock, else -3.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, -9) == ARGV[1] then
  return redis.call('PTTL', KEYS[1])
end
return -3

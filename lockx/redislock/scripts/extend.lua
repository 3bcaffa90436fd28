-- KEYS: lock L. ARGV: owner (encoded), lease ms.
-- Returns 1 if owner holds the lock (lease reset), else 0.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, -9) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0

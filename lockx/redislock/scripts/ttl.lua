-- KEYS: lock hash. ARGV: owner.
-- Returns the remaining lease in ms if owner holds the lock, else -3.
if redis.call('HGET', KEYS[1], 'o') == ARGV[1] then
  return redis.call('PTTL', KEYS[1])
end
return -3

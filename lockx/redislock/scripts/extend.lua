-- KEYS: lock hash. ARGV: owner, lease ms.
-- Returns 1 if owner holds the lock (lease reset), else 0.
if redis.call('HGET', KEYS[1], 'o') == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0

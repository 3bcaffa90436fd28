-- save_result.lua: store an idempotent call's outcome unless one is stored.
-- KEYS[1]  the result key
-- ARGV[1]  the encoded outcome
-- ARGV[2]  retention in milliseconds
-- Returns nil if ARGV[1] was stored, else the outcome already there, so the
-- caller learns which outcome won in the same round trip. (SET NX GET does
-- this in one command only from Redis 7.0 on.)
local cur = redis.call('GET', KEYS[1])
if cur then
  return cur
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false

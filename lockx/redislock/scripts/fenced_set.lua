-- fenced_set.lua: SET a key only if the writer's fencing token is current,
-- the check and the write in one atomic step.
-- KEYS[1]  the resource's fence key
-- KEYS[2]  the key to write (same hash tag as KEYS[1] on Cluster)
-- ARGV[1]  the token presented
-- ARGV[2]  the value
-- ARGV[3]  time to live in milliseconds, 0 for none
-- Returns 0 if written, else the higher token already recorded.
local seen = fence(KEYS[1], ARGV[1])
if seen ~= 0 then
  return seen
end
if ARGV[3] ~= '0' then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
else
  redis.call('SET', KEYS[2], ARGV[2])
end
return 0

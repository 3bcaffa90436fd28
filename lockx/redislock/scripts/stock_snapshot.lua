-- stock_snapshot.lua: one atomic read of a segment.
-- Returns nil if the segment does not exist, else {level, supplied,
-- {id, "qty:deadline_ms:user", …}}.
local s = redis.call('HMGET', KEYS[1], 'n', 'in')
if not s[1] then
  return false
end
return {tonumber(s[1]), tonumber(s[2]), redis.call('HGETALL', KEYS[2])}

-- stock_add.lua: add ARGV[1] units (negative: withdraw) to the segment's
-- level and supplied count.
-- Returns the new level, -1 if the segment does not exist, or -2 - level
-- if a withdrawal exceeds the level.
local n = tonumber(redis.call('HGET', KEYS[1], 'n'))
if not n then
  return -1
end
local d = tonumber(ARGV[1])
if n + d < 0 then
  return -2 - n
end
redis.call('HINCRBY', KEYS[1], 'in', d)
return redis.call('HINCRBY', KEYS[1], 'n', d)

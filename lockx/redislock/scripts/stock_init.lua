-- stock_init.lua: record a SKU's initial segment levels unless recorded.
-- KEYS[1]  the SKU's meta key
-- ARGV[1]  the levels, comma-separated
-- Returns the levels already recorded, or nil if ARGV[1] was recorded. The
-- segments themselves are created by stock_seg_init.lua, one per slot.
local cur = redis.call('GET', KEYS[1])
if cur then
  return cur
end
redis.call('SET', KEYS[1], ARGV[1])
return false

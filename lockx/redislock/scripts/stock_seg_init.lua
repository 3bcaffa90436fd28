-- stock_seg_init.lua: create one stock segment unless it exists.
-- KEYS[1]  the segment hash (fields n: level, in: supplied)
-- ARGV[1]  the initial level
-- Returns 1 if created, 0 if it existed (then it is left alone).
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'n', ARGV[1], 'in', ARGV[1])
return 1

-- stock_expire.lua: remove up to ARGV[1] reservations whose deadline has
-- passed and return their units to the segment.
-- Returns the removed entries as a flat list: id, "qty:deadline_ms:user", …
local ids = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now_ms(), 'LIMIT', 0, tonumber(ARGV[1]))
local out = {}
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[3], id)
  local v = redis.call('HGET', KEYS[2], id)
  if v then
    redis.call('HDEL', KEYS[2], id)
    redis.call('HINCRBY', KEYS[1], 'n', tonumber(string.match(v, '^(%d+):')))
    out[#out + 1] = id
    out[#out + 1] = v
  end
end
return out

-- stock_settle.lua: confirm (ARGV[2] == '1') or release ledger entry
-- ARGV[1]. Release removes the entry and returns its units to the segment.
-- Confirm clears a reservation's deadline unless it has passed: an expired
-- entry is left for stock_expire.lua, so that one caller returns it.
-- Returns 1 on success, 0 if the entry is missing or expired.
local v = redis.call('HGET', KEYS[2], ARGV[1])
if not v then
  return 0
end
local q, dl, user = string.match(v, '^(%d+):(%d+):(.*)$')
if ARGV[2] == '1' then
  if dl == '0' then
    return 1
  end
  if tonumber(dl) <= now_ms() then
    return 0
  end
  redis.call('HSET', KEYS[2], ARGV[1], q .. ':0:' .. user)
  redis.call('ZREM', KEYS[3], ARGV[1])
  return 1
end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HINCRBY', KEYS[1], 'n', tonumber(q))
return 1

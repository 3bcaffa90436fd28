-- stock_take.lua: move ARGV[2] units from the segment into ledger entry
-- ARGV[1], if the segment holds at least that many (and exactly ARGV[3]
-- when ARGV[3] > 0: the compare-and-swap of lock-based mode).
-- ARGV[4]  reservation TTL in ms (0: a confirmed entry)
-- ARGV[5]  the buyer
-- Returns the level after the take (>= 0), -1 if the segment does not
-- exist, or -2 - level on refusal. An entry id already in the ledger is a
-- retry: it returns the level and changes nothing.
local n = tonumber(redis.call('HGET', KEYS[1], 'n'))
if not n then
  return -1
end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
  return n
end
local q = tonumber(ARGV[2])
local e = tonumber(ARGV[3])
if n < q or (e > 0 and n ~= e) then
  return -2 - n
end
local dl = 0
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  dl = now_ms() + ttl
  redis.call('ZADD', KEYS[3], dl, ARGV[1])
end
redis.call('HSET', KEYS[2], ARGV[1], q .. ':' .. dl .. ':' .. ARGV[5])
return redis.call('HINCRBY', KEYS[1], 'n', -q)

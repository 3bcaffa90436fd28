-- stock_quota.lua: add ARGV[1] to a buyer's purchase count (KEYS[1]) if the
-- result stays within ARGV[2] (0: no limit); the count never drops below 0
-- and a zero count is deleted.
-- Returns the new count, or -1 - count if the limit refused the claim.
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
local d = tonumber(ARGV[1])
local lim = tonumber(ARGV[2])
if d > 0 and lim > 0 and n + d > lim then
  return -1 - n
end
n = n + d
if n <= 0 then
  redis.call('DEL', KEYS[1])
  return 0
end
redis.call('SET', KEYS[1], n)
return n

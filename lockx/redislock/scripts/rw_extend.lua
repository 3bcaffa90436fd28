-- Lease renewal of one side of a read/write lock.
-- KEYS: H, R, Q, D. ARGV: owner, lease ms, mode ('r' or 'w').
-- Returns 1 if owner holds that side (lease reset), else 0.
local h, r, q, owner = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local us = now_us()
local now = math.floor(us / 1000)
local writer = rw_purge(h, r, now)
local until_ms = lease_end(us, tonumber(ARGV[2]))
if ARGV[3] == 'w' then
  if writer ~= owner then return 0 end
  redis.call('HSET', h, 'x', until_ms)
else
  if not redis.call('ZSCORE', r, owner) then return 0 end
  redis.call('ZADD', r, 'XX', until_ms, owner)
end
rw_keep(h, r, q, now)
return 1

-- Release of one side of a read/write lock, or withdrawal from its queue.
-- KEYS: H, R, Q, D
-- ARGV: owner, mode ('r' or 'w'), wake-up channel prefix, watched lock key
-- Returns 1 if owner held that side and released it, else 0.
local h, r, q, d, owner = KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1]
local now = math.floor(now_us() / 1000)
local writer = rw_purge(h, r, now)
local held = 0
if ARGV[2] == 'w' then
  if writer == owner then
    redis.call('HDEL', h, 'w', 'x')
    writer = false
    held = 1
  end
elseif redis.call('ZREM', r, owner) == 1 then
  held = 1
end
local withdrew = q_del(q, d, owner)
if held == 1 or withdrew then rw_wake(h, r, q, d, now, writer, ARGV[3], ARGV[4]) end
rw_keep(h, r, q, now)
return held

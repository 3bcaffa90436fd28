-- A holder passes the lock straight to another owner of its own process
-- (driver.Passer, for lockx.LocalFirst): one script instead of a release
-- and the next owner's acquire.
-- KEYS: lock L only; Q and W are derived from it as in acquire.lua
-- ARGV: owner (encoded), tombstone ms (0: none), wake-up channel prefix,
--       next owner (encoded), lease ms, flags (8: the token from the clock,
--       as in acquire.lua)
-- Returns the next owner's token (> 0) if passed; 0 if owner did not hold
-- L (after removing owner from the queue if it waited there, as release.lua
-- does); -1 if others wait at the server (Q or W exists), when the lock is
-- released exactly as release.lua releases it, and the queue's head goes
-- first.
--
-- A pass is three server commands: GET, EXISTS and SET. The token is one
-- past the holder's (with the clock flag, at least the server clock in µs),
-- so tokens stay strictly increasing across passes as across grants; a pass
-- takes longer than a µs, as a grant does, so tokens never run ahead of the
-- clock either, and the clock keeps taking over above them once a key's
-- tombstone lapses (put_lock in queue.lua).
local lk, owner = KEYS[1], ARGV[1]
local v = redis.call('GET', lk)
if not (v and #v > 8 and string.sub(v, 1, -9) == owner) then
  withdraw(lk, owner, v, ARGV[3])
  return 0
end
if redis.call('EXISTS', lk .. ':q', lk .. ':w') > 0 then
  free_held(lk, v, true, ARGV[2], ARGV[3])
  return -1
end
local now = nil
if ARGV[6] == '8' then now = now_us() end
local tok = put_lock(lk, ARGV[4], token_of(v), now, ARGV[5])
if not tok then
  return redis.error_reply('ERR redislock: fencing token above 2^53')
end
return tok

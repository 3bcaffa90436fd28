-- A Redlock (Quorum) fair waiter was granted a majority; this node refused
-- its attempt. A release may have handed the lock to it since: then it keeps
-- the node, with its lease renewed, and the grant's token counts it (the
-- token Quorum reports is the largest of the holding nodes'). Otherwise it
-- leaves the node's fair queue, so that no later handoff gives it the node,
-- with a larger token, after its Acquire returned.
-- KEYS: lock L only; Q, D and W are derived from it as in acquire.lua
-- ARGV: owner (encoded), lease ms, wake-up channel prefix
-- Returns owner's token if it holds L, else 0.
local lk, owner = KEYS[1], ARGV[1]
local v = redis.call('GET', lk)
if v and #v > 8 and string.sub(v, 1, -9) == owner then
  redis.call('PEXPIRE', lk, ARGV[2])
  return token_of(v)
end
withdraw(lk, owner, v, ARGV[3])
return 0

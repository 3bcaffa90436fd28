-- fence.lua: the resource-side fencing check, shared by fence_check.lua and
-- fenced_set.lua (concatenated in front of them).
-- fence(fkey, token) accepts token iff it is >= the highest token recorded
-- in fkey, records it and returns 0; otherwise it returns the recorded
-- token and changes nothing. Tokens are below 2^53, exact as Lua numbers.
local function fence(fkey, token)
  local tok = tonumber(token)
  local seen = tonumber(redis.call('GET', fkey) or '0')
  if tok < seen then
    return seen
  end
  if tok > seen then
    -- No expiry: a fence that forgot its token would let a stale writer in.
    redis.call('SET', fkey, token)
  end
  return 0
end

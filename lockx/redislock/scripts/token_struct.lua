-- The fencing-token helpers of token.lua on Redis's struct library, which
-- every Redis with functions (7.0 and later) has: a third of the Lua work of
-- a grant in plain Lua. Only the function library (scripts.go) uses them.
local function token_of(v)
  return (struct.unpack('>I8', v, #v - 7))
end

local function token_bytes(tok)
  return struct.pack('>I8', tok)
end

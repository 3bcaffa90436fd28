-- Fencing-token helpers in plain Lua, for the scripts sent with EVAL: the
-- embedded servers they must run on (miniredis) have no struct library. The
-- function library (scripts.go) gets token_struct.lua instead.
--
-- token_of returns the token a lock value or tombstone v ends with (at least
-- 8 bytes): an 8-byte big-endian integer, below 2^53 and so exact in a Lua
-- number.
local function token_of(v)
  local a, b, c, d, e, f, g, h = string.byte(v, -8, -1)
  return ((((((a * 256 + b) * 256 + c) * 256 + d) * 256 + e) * 256 + f) * 256 + g) * 256 + h
end

-- token_bytes returns tok (below 2^53) as those 8 bytes.
local function token_bytes(tok)
  local hi, lo = math.floor(tok / 4294967296), tok % 4294967296
  return string.char(math.floor(hi / 16777216), math.floor(hi / 65536) % 256, math.floor(hi / 256) % 256, hi % 256,
    math.floor(lo / 16777216), math.floor(lo / 65536) % 256, math.floor(lo / 256) % 256, lo % 256)
end

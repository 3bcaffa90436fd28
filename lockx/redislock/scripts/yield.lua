-- A Redlock (Quorum) fair waiter gives back a grant it cannot use yet while
-- keeping its place: the lock is freed but not handed on, and owner goes
-- back to the head of the fair queue, where the grant (a handoff, or a
-- free lock taken as the head) had taken it from. Quorum yields only when
-- owner is first in line on a majority of nodes (quorum_yield.go).
-- KEYS: lock L only; Q and D are derived from it as in acquire.lua
-- ARGV: owner (encoded), lease ms, queue TTL ms, backend id, tombstone ms
-- Returns 1 if owner held L and yielded it, else 0 (nothing changed).
local lk, owner = KEYS[1], ARGV[1]
local v = redis.call('GET', lk)
if not (v and #v > 8 and string.sub(v, 1, -9) == owner) then return 0 end
local q, d = lk .. ':q', lk .. ':qd'
local now = now_us()
local qttl = tonumber(ARGV[3])
-- Ahead of the current head: everyone queued here arrived after owner
-- reached the head.
local score = now
local head = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
if head[2] then score = tonumber(head[2]) - 1 end
redis.call('ZADD', q, string.format('%d', score), owner)
redis.call('HSET', d, owner, string.format('%d:%d:%s', math.floor(now / 1000) + qttl, math.min(tonumber(ARGV[2]), qttl), ARGV[4]))
keep_queue(q, d, qttl, false)
-- The token stays behind while the queue lives, so the next grant issues a
-- larger one.
redis.call('SET', lk, string.sub(v, -8), 'PX', math.max(tonumber(ARGV[5]), redis.call('PTTL', q)))
return 1

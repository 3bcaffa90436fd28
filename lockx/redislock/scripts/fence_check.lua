-- fence_check.lua: FenceStore.Fence.
-- KEYS[1]  the resource's fence key
-- ARGV[1]  the token presented
-- Returns 0 if accepted, else the higher token already recorded.
return fence(KEYS[1], ARGV[1])

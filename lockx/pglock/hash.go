package pglock

import "hash/fnv"

// keyHash maps a namespaced key to the 64-bit advisory-lock key: FNV-1a 64
// over namespace, a zero byte and the key.
//
// Two keys that collide share one advisory lock. That costs false contention
// (one waits for the other) and never safety: the lock table row, every owner
// check and the in-process bookkeeping compare the full key, and exclusion is
// only ever coarser than asked for. With n keys held at once, the chance that
// any two collide is about n²/2⁶⁵: 3·10⁻⁸ for a million.
func keyHash(namespace, key string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(namespace))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(key))
	return int64(h.Sum64())
}

// waitFlag is the advisory lock, in the two-int4 key space (disjoint from the
// bigint space of the locks themselves), that a process holds in shared mode
// while it has waiters for hash. A release sends a notification only when it
// cannot take the flag exclusively, so uncontended releases cost no NOTIFY.
func waitFlag(hash int64) (int32, int32) { return int32(hash >> 32), int32(hash) }

package pglock

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/fnv"

	"github.com/lockx-go/lockx/lockx/driver"
)

// keyHash maps a namespaced key to the 64-bit advisory-lock key: FNV-1a 64
// over namespace, a zero byte and the key.
//
// Two keys that collide share one advisory lock. That costs false contention
// (one waits for the other) and never safety: the lock table row, every owner
// check and the in-process bookkeeping compare the full key, and exclusion is
// only ever coarser than asked for. With n keys held at once, the chance that
// any two collide is about n²/2⁶⁵: 3·10⁻⁸ for a million. FNV-1a collisions
// can be computed, though: a Backend refuses an attempt on a key whose id is
// held under another key (ErrKeyCollision), and WithKeySecret makes the
// ids unpredictable to whoever lacks the secret.
func keyHash(namespace, key string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(namespace))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(key))
	return int64(h.Sum64())
}

// id maps a namespaced key to its advisory-lock id under c: keyHash, or
// with WithKeySecret the first 8 bytes of HMAC-SHA256 under the secret over
// the same bytes.
func (c *config) id(namespace, key string) int64 {
	if c.idHook != nil {
		return c.idHook(namespace, key)
	}
	if c.secret == nil {
		return keyHash(namespace, key)
	}
	m := hmac.New(sha256.New, c.secret)
	_, _ = m.Write([]byte(namespace))
	_, _ = m.Write([]byte{0})
	_, _ = m.Write([]byte(key))
	return int64(binary.BigEndian.Uint64(m.Sum(nil)))
}

// WithKeySecret makes a Backend (and TxLock) derive advisory-lock ids from
// keys with HMAC-SHA256 under secret (at least 16 bytes) instead of the
// unkeyed FNV-1a 64, so that a party who chooses key names (a lockxd
// tenant, an end user) but lacks the secret cannot compute two keys that
// share an id. Every process of a deployment that locks the same keys must
// use the same secret: two processes that map one key to different ids
// both hold it. Turning it on, off or changing it is therefore an upgrade
// with a full stop: stop every process on the old mapping before the first
// on the new one takes a lock. Without it, a crafted collision is still
// refused, not waited on (ErrKeyCollision).
func WithKeySecret(secret []byte) Option {
	return func(c *config) {
		if len(secret) < 16 {
			c.fail("key secret", "need at least 16 bytes, got %d", len(secret))
			return
		}
		c.secret = append([]byte(nil), secret...)
	}
}

// ErrKeyCollision reports an acquisition refused because its key's
// advisory-lock id is held under a different key: two keys share the id
// (by chance, about n²/2⁶⁵ for n keys held at once, or crafted; see
// WithKeySecret). Retrying is pointless while the other key is held, so it
// matches driver.ErrNoRetry: lockx's Acquire returns it at once instead of
// waiting. Rename one of the keys, or use WithKeySecret.
var ErrKeyCollision = fmt.Errorf("pglock: the key's advisory-lock id is held under another key: %w", driver.ErrNoRetry)

// collision is the error for an attempt on key refused by a collision.
func collision(key string) error {
	return fmt.Errorf("pglock: acquire %q: %w", key, ErrKeyCollision)
}

// waitFlag is the advisory lock, in the two-int4 key space (disjoint from the
// bigint space of the locks themselves), that a process holds in shared mode
// while it has waiters for hash. A release sends a notification only when it
// cannot take the flag exclusively, so uncontended releases cost no NOTIFY.
func waitFlag(hash int64) (int32, int32) { return int32(hash >> 32), int32(hash) }

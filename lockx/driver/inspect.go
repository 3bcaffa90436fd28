package driver

import (
	"context"
	"time"
)

// LockInfo describes a held lock as its backend sees it. Reentrant handles
// are client-side bookkeeping, invisible to the backend: one LockInfo is one
// owner's hold.
type LockInfo struct {
	Key   string `json:"key"`
	Owner Owner  `json:"owner"`
	Token Token  `json:"token"`
	// TTL is the lease left; 0 if the backend cannot tell (a PostgreSQL
	// session lock lives as long as its session).
	TTL time.Duration `json:"ttl"`
	// Age is how long the lock has been held, if the backend records the
	// grant time (memlock, pglock); 0 if unknown (Redis keeps only the
	// lease). WatchLongHolders then measures it from first sight.
	Age time.Duration `json:"age"`
	// Waiters is the number of owners queued for the key (fair waiters),
	// or -1 if unknown.
	Waiters int `json:"waiters"`
}

// Inspector is the optional capability of a Backend that lists its held
// locks, for operators (cmd/lockx) and for WatchLongHolders. It reads only:
// it never changes a lock.
type Inspector interface {
	// Locks calls fn with every lock held under key prefix ("" for all),
	// in no particular order, until fn returns false. A lock granted or
	// freed during the scan may or may not be reported.
	Locks(ctx context.Context, prefix string, fn func(LockInfo) bool) error
	// Lock returns the holder of key, or an error matching ErrNotHeld if
	// nobody holds it.
	Lock(ctx context.Context, key string) (LockInfo, error)
}

package driver

import (
	"context"
	"errors"
	"time"
)

// RWMode says which side of a read/write lock an RWBackend call concerns.
type RWMode uint8

// The two sides of a read/write lock.
const (
	// ModeRead is a shared hold: any number of readers at once, no writer.
	ModeRead RWMode = iota + 1
	// ModeWrite is an exclusive hold: one writer, no reader.
	ModeWrite
)

// String returns "read" or "write".
func (m RWMode) String() string {
	switch m {
	case ModeRead:
		return "read"
	case ModeWrite:
		return "write"
	}
	return "invalid"
}

// ErrUpgrade reports an attempt to take the write side of a read/write lock
// by an owner that holds its read side. Upgrading would deadlock as soon as
// two readers tried it, so it is refused at once; release the read lock and
// acquire the write lock instead (and re-check what you read).
var ErrUpgrade = errors.New("lockx: cannot upgrade a read lock to a write lock")

// RWBackend is the optional capability of a Backend that serves read/write
// locks (patterns/rwlock). A read/write key is its own namespace: it does not
// conflict with a plain lock of the same name.
//
// Every hold — each reader and the writer — has its own owner and its own
// lease, so a crashed reader's hold expires on its own and can never block
// writers for longer than its lease.
//
// Grant rules for AcquireRW(mode, req):
//
//   - ModeWrite is granted when no other owner holds the key in either mode
//     and, with waiters queued, req.Owner is at the head of the queue. A
//     refused attempt with req.Wait enqueues req.Owner (refreshing its place
//     for req.QueueTTL), so a waiting writer stops new readers from entering.
//     An owner that holds the read side gets ErrUpgrade.
//   - ModeRead is granted when no other owner holds the write side and, if
//     req.Fair, no writer is queued ahead of req.Owner (writer preference;
//     readers queued ahead of a writer still go first). Without req.Fair a
//     reader only waits for a writer that holds the key (reader preference).
//     An owner that holds the write side is granted the read side too
//     (downgrade: take read, then release write).
//
// Both are idempotent per (mode, owner): a repeat attempt by a holder resets
// its lease and returns the same token.
//
// Tokens: a write grant returns a new fencing token, strictly greater than
// every token issued earlier for the key in either mode. A read grant returns
// the key's read epoch: the token of the latest write while the key is in
// use, or a fresh token (greater than every earlier one) once the key has
// been idle — pglock keeps returning the latest write's token then (a fresh
// one only for a never-written key). Readers of one epoch share it; it is at least the token of every
// write that completed before the reader entered, and no writer with a
// greater token can be granted while the reader holds.
//
// A Backend that also implements Notifier wakes waiters of a read/write key
// through Watch on the same key string: a release wakes the waiters that can
// now be granted (every reader queued before the next writer, or that writer),
// not every watcher.
type RWBackend interface {
	// AcquireRW makes one attempt to grant mode on req.Key to req.Owner for
	// req.Lease. A refusal is Result{Acquired: false} with TTL set to the
	// blocking holder's remaining lease when known.
	AcquireRW(ctx context.Context, mode RWMode, req Request) (Result, error)
	// ExtendRW resets owner's mode hold on key to lease, or returns ErrNotHeld.
	ExtendRW(ctx context.Context, mode RWMode, key string, owner Owner, lease time.Duration) error
	// ReleaseRW frees owner's mode hold on key and withdraws owner from the
	// key's queue. It returns ErrNotHeld if owner held no such hold.
	ReleaseRW(ctx context.Context, mode RWMode, key string, owner Owner) error
}

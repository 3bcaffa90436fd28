package lockx

import (
	"context"
	"time"
)

// GrantOps are the backend operations behind one kind of hold. The core lock
// is one kind (over Backend's own methods); pattern packages build others
// from a capability interface (RWBackend, SemaphoreBackend) and get the very
// same waiting, lease, watchdog, reentrancy and loss machinery through
// AcquireGrant. Users of those packages never see GrantOps.
type GrantOps struct {
	// Kind names the kind of hold, e.g. "rlock" or "permit". It names the
	// operation in errors and separates kinds for reentrancy.
	Kind string
	// Reentrant makes an acquisition under a context whose owner already
	// holds a live hold of this Kind and key on the same Client return a new
	// handle on that hold, as Client.Acquire does. Otherwise every
	// acquisition gets a fresh owner, whatever the context carries.
	Reentrant bool
	// Acquire makes one attempt; see Backend.Acquire for its contract. A
	// returned error matching ErrUpgrade or ErrInvalidArgument is a final
	// verdict; any other error is an unknown outcome and is retried.
	Acquire func(ctx context.Context, req Request) (Result, error)
	// Extend resets owner's lease, or returns ErrNotHeld.
	Extend func(ctx context.Context, key string, owner Owner, lease time.Duration) error
	// Release frees owner's hold and withdraws owner from any queue, or
	// returns ErrNotHeld.
	Release func(ctx context.Context, key string, owner Owner) error
}

// Grant is a handle on a pattern hold — a read or write hold of a read/write
// lock, or a semaphore permit. It is a Lock: same Key, Owner, Token, Lost,
// Context, Extend and Release, renewed by the same watchdog.
type Grant = Lock

// AcquireGrant obtains a hold of key through ops, waiting for it as Acquire
// waits for a lock: with wake-ups from a Notifier backend (Watch on key), the
// backoff, the wait budget and the client's lifetime. The options are the
// client's (LocalFirst applies to plain locks only; fairness is up to ops,
// which sees Request.Fair).
func (c *Client) AcquireGrant(ctx context.Context, key string, ops GrantOps, opts ...Option) (*Grant, error) {
	return c.acquire(ctx, key, &ops, opts, true)
}

// TryAcquireGrant makes one attempt at a hold of key through ops; a refusal
// matches ErrNotAcquired.
func (c *Client) TryAcquireGrant(ctx context.Context, key string, ops GrantOps, opts ...Option) (*Grant, error) {
	return c.acquire(ctx, key, &ops, opts, false)
}

// lockOps is the plain lock's GrantOps over the backend's own methods.
func lockOps(b Backend) GrantOps {
	if b == nil {
		return GrantOps{Kind: "lock", Reentrant: true}
	}
	return GrantOps{Kind: "lock", Reentrant: true, Acquire: b.Acquire, Extend: b.Extend, Release: b.Release}
}

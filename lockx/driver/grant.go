package driver

import (
	"context"
	"time"
)

// GrantOps are the backend operations behind one kind of hold. The core lock
// is one kind (over Backend's own methods); pattern packages build others
// from a capability interface (RWBackend, SemaphoreBackend) and get the very
// same waiting, lease, watchdog, reentrancy and loss machinery through
// lockx.Client.AcquireGrant. Users of those packages never see GrantOps.
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

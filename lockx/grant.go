package lockx

import (
	"context"

	"github.com/lockx-go/lockx/lockx/driver"
)

// Grant is a handle on a pattern hold — a read or write hold of a read/write
// lock, or a semaphore permit. It is a Lock: same Key, Owner, Token, Lost,
// Context, Extend and Release, renewed by the same watchdog.
type Grant = Lock

// AcquireGrant obtains a hold of key through ops, waiting for it as Acquire
// waits for a lock: with wake-ups from a Notifier backend (Watch on key), the
// backoff, the wait budget and the client's lifetime. The options are the
// client's (LocalFirst applies to plain locks only; fairness is up to ops,
// which sees Request.Fair).
func (c *Client) AcquireGrant(ctx context.Context, key string, ops driver.GrantOps, opts ...Option) (*Grant, error) {
	return c.acquire(ctx, key, &ops, opts, true)
}

// TryAcquireGrant makes one attempt at a hold of key through ops; a refusal
// matches ErrNotAcquired.
func (c *Client) TryAcquireGrant(ctx context.Context, key string, ops driver.GrantOps, opts ...Option) (*Grant, error) {
	return c.acquire(ctx, key, &ops, opts, false)
}

// lockOps is the plain lock's GrantOps over the backend's own methods.
func lockOps(b driver.Backend) driver.GrantOps {
	if b == nil {
		return driver.GrantOps{Kind: "lock", Reentrant: true}
	}
	return driver.GrantOps{Kind: "lock", Reentrant: true, Acquire: b.Acquire, Extend: b.Extend, Release: b.Release}
}

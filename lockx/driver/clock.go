package driver

import (
	"context"
	"time"
)

// Clock is the capability of telling the store's own time: Redis TIME,
// PostgreSQL clock_timestamp(), the process clock for memlock.
// patterns/cronguard derives triggers from it (UsingBackendTime), as
// ShedLock's usingDbTime does, so that a fleet whose clocks disagree still
// agrees on "now".
type Clock interface {
	// Now returns the store's current time.
	Now(ctx context.Context) (time.Time, error)
	// Resolution returns the finest duration the store's clock and leases
	// distinguish: a schedule finer than it cannot be guarded.
	Resolution() time.Duration
}

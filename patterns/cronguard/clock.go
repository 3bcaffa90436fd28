package cronguard

import (
	"context"
	"time"
)

// Clock is the backend capability of telling the store's own time: Redis
// TIME, PostgreSQL now(), the process clock for memlock. With
// UsingBackendTime the guard derives triggers from it instead of the
// instance's clock, as ShedLock's usingDbTime does, so that a fleet whose
// clocks disagree still agrees on "now". Backends implement it in their
// clock.go; the guard finds it with a type assertion on Client.Backend.
type Clock interface {
	// Now returns the store's current time.
	Now(ctx context.Context) (time.Time, error)
	// Resolution returns the finest duration the store's clock and leases
	// distinguish: a schedule finer than it cannot be guarded.
	Resolution() time.Duration
}

// defaultResolution is assumed for a backend that does not implement
// Clock: the network backends count leases in milliseconds.
const defaultResolution = time.Millisecond

func resolution(b any) time.Duration {
	if c, ok := b.(Clock); ok {
		if r := c.Resolution(); r > 0 {
			return r
		}
	}
	return defaultResolution
}

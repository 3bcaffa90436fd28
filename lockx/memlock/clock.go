package memlock

import (
	"context"
	"time"
)

// Now returns the backend's time: the process clock, the same one its
// leases run on. With Resolution it implements driver.Clock, the
// capability patterns/cronguard uses to derive triggers from the store's
// clock instead of each instance's.
func (b *Backend) Now(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	return b.now(), nil
}

// Resolution returns the finest duration the backend's leases tell apart:
// one nanosecond, as they are kept as time.Time values.
func (b *Backend) Resolution() time.Duration { return time.Nanosecond }

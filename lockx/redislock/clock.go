package redislock

import (
	"context"
	"time"

	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// Now returns the Redis server's time (TIME), the clock its leases run on.
// With Resolution it implements driver.Clock, so patterns/cronguard can
// derive triggers from one clock for a whole fleet, as ShedLock's
// usingDbTime does. On a Cluster the answer comes from whichever node the
// client picks; nodes are assumed to agree to well under a schedule's period.
func (b *Backend) Now(ctx context.Context) (time.Time, error) {
	if b.err != nil {
		return time.Time{}, b.err
	}
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	t, err := b.rdb.Time(ctx).Result()
	if err != nil {
		return time.Time{}, backendkit.Fail(ctx, "time", err)
	}
	return t, nil
}

// Resolution returns the finest duration the backend's leases tell apart:
// one millisecond (PEXPIRE), though TIME itself counts microseconds.
func (b *Backend) Resolution() time.Duration { return time.Millisecond }

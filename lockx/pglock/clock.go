package pglock

import (
	"context"
	"errors"
	"time"

	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// Now returns the PostgreSQL server's time: clock_timestamp(), the moment of
// the call (now() would be the start of the enclosing transaction). With
// Resolution it implements driver.Clock, so patterns/cronguard can derive
// triggers from one clock for a whole fleet, as ShedLock's usingDbTime does.
func (b *Backend) Now(ctx context.Context) (time.Time, error) {
	if b.cfg.err != nil {
		return time.Time{}, b.cfg.err
	}
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	var t time.Time
	if err := b.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&t); err != nil {
		if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
			return time.Time{}, err
		}
		return time.Time{}, backendkit.Unavailable("now", err)
	}
	return t, nil
}

// Resolution returns the finest duration the server's clock tells apart:
// one microsecond (timestamptz).
func (b *Backend) Resolution() time.Duration { return time.Microsecond }

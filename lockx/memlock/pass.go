package memlock

import (
	"context"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
)

var _ driver.Passer = (*Backend)(nil)

// Pass implements driver.Passer: under the table's mutex, from's lock goes
// to to with the next token — unless a fair waiter is queued for key or a
// waiter watches it, when it is released as Release releases it.
func (b *Backend) Pass(ctx context.Context, key string, from, to driver.Owner, lease time.Duration) (driver.Result, error) {
	if err := ctx.Err(); err != nil {
		return driver.Result{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	e := b.live(key, now)
	if e == nil || e.owner != from || len(e.queue) > 0 || b.watchers.Len(key) > 0 {
		return driver.Result{}, b.release(key, from, now)
	}
	return b.grant(driver.Request{Key: key, Owner: to, Lease: lease}, e, now), nil
}

package httplock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/httplock"
	"github.com/lockx-go/lockx/patterns/leader/leadertest"
)

// TestLeader runs the leader-election suite through lockxd, with Redis and
// with PostgreSQL behind it: each instance is a client of its own. The
// suite's evictions (lockx.ForceUnlock) reach the backend behind lockxd,
// as an operator's would: through lockxd a hold's label operates nothing.
func TestLeader(t *testing.T) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			raw := bc.new(t)
			url := serve(t, raw)
			leadertest.Run(t, func(t *testing.T) *lockx.Client {
				c := lockx.New(operatorView{client(t, url, "key-a"), raw, "lockxd/a/"})
				t.Cleanup(func() { _ = c.Close() })
				return c
			})
		})
	}
}

// operatorView is a tenant's httplock backend whose inspection and
// releases by label go to the backend behind lockxd, as the operator's
// tools (lockx force-unlock on Redis or PostgreSQL) do.
type operatorView struct {
	*httplock.Backend
	raw driver.Backend
	ns  string
}

func (o operatorView) Lock(ctx context.Context, key string) (lockx.LockInfo, error) {
	var in driver.Inspector
	if !driver.As(o.raw, &in) {
		return lockx.LockInfo{}, lockx.ErrNoInspector
	}
	li, err := in.Lock(ctx, o.ns+key)
	li.Key = key
	return li, err
}

// Release releases as the tenant's client; an owner lockxd does not know
// as a secret is a label from Lock, which the operator evicts on the
// backend.
func (o operatorView) Release(ctx context.Context, key string, owner lockx.Owner) error {
	err := o.Backend.Release(ctx, key, owner)
	if errors.Is(err, lockx.ErrNotHeld) {
		return o.raw.Release(ctx, o.ns+key, owner)
	}
	return err
}

package etcdlock_test

import (
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/etcdlock"
	"github.com/lockx-go/lockx/patterns/leader/leadertest"
)

// TestLeader runs the leader-election suite over etcd: each instance is a
// client over a backend (a lease) of its own, sharing one key prefix.
func TestLeader(t *testing.T) {
	prefix := etcdlock.WithPrefix(testPrefix())
	leadertest.Run(t, func(t *testing.T) *lockx.Client {
		c := lockx.New(backend(t, client(t, single), prefix))
		t.Cleanup(func() { _ = c.Close() })
		return c
	})
}

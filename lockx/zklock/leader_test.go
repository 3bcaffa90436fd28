package zklock_test

import (
	"testing"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/patterns/leader/leadertest"
)

// TestLeader runs the leader-election suite over ZooKeeper: each instance
// is a client over a session of its own.
func TestLeader(t *testing.T) {
	z := testenv.SharedZooKeeper(t)
	leadertest.Run(t, func(t *testing.T) *lockx.Client {
		c := lockx.New(dial(t, z.Addr))
		t.Cleanup(func() { _ = c.Close() })
		return c
	})
}

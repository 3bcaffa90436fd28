package redislock_test

import (
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/leader/leadertest"
)

// TestLeader runs the leader-election suite over one Redis: each instance
// is a client over a backend of its own, sharing one key prefix.
func TestLeader(t *testing.T) {
	rdb := single(t)
	prefix := redislock.WithPrefix(testPrefix())
	leadertest.Run(t, func(t *testing.T) *lockx.Client {
		c := lockx.New(backend(t, rdb, prefix))
		t.Cleanup(func() { _ = c.Close() })
		return c
	})
}

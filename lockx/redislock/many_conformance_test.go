package redislock_test

import (
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// TestConformanceManySingle runs the multi-key suite (Client.AcquireMany)
// against the machine's Redis; all backends of the run share a prefix.
func TestConformanceManySingle(t *testing.T) {
	rdb := single(t)
	prefix := testPrefix()
	lockxtest.RunMany(t, func(t *testing.T) lockx.Backend {
		return redislock.New(rdb, redislock.WithPrefix(prefix))
	})
}

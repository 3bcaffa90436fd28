package redislock_test

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/lockx-go/lockx/internal/miniclock"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/redis/go-redis/v9"
)

// TestConformanceMiniredis runs the suite on an embedded miniredis, the
// server examples/seckill uses when no Redis is configured: the real
// scripts must run there too.
func TestConformanceMiniredis(t *testing.T) {
	m := miniredis.RunT(t)
	t.Cleanup(miniclock.Follow(m)) // leases must expire in real time
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	lockxtest.Run(t, func(*testing.T) driver.Backend { return redislock.New(rdb) })
}

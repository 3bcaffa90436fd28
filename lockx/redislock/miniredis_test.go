package redislock_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/redis/go-redis/v9"
)

// TestConformanceMiniredis runs the suite on an embedded miniredis, the
// server examples/seckill uses when no Redis is configured: the real
// scripts must run there too.
func TestConformanceMiniredis(t *testing.T) {
	m := miniredis.RunT(t)
	// miniredis ages keys only when told to: let its clock follow real time.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				m.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	lockxtest.Run(t, func(*testing.T) lockx.Backend { return redislock.New(rdb) })
}

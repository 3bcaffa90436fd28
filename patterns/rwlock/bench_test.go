package rwlock_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/rwlock"
)

// BenchmarkReadMostly is the read-mostly workload: 64 goroutines on
// one key, 95 % reads, each holding the lock for a simulated 1 ms query;
// "lock" takes a plain lockx lock for every operation, "rwlock" a read or
// write lock. Compare ns/op between the two.
func BenchmarkReadMostly(b *testing.B) {
	backends := map[string]func(b *testing.B) driver.Backend{
		"memlock": func(*testing.B) driver.Backend { return memlock.New() },
		"redis": func(b *testing.B) driver.Backend {
			rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(b), PoolSize: 128})
			b.Cleanup(func() { _ = rdb.Close() })
			return redislock.New(rdb, redislock.WithPrefix("lockxbench:"+string(lockx.NewOwner())[:8]+":"))
		},
	}
	for _, name := range []string{"memlock", "redis"} {
		for _, kind := range []string{"lock", "rwlock"} {
			b.Run(name+"/"+kind, func(b *testing.B) {
				be := backends[name](b)
				c := lockx.New(be, lockx.WithBackoff(time.Millisecond, 20*time.Millisecond))
				defer c.Close()
				rw := rwlock.New(c)
				key := "bench:" + string(lockx.NewOwner())
				ctx := context.Background()
				warmUp(b, be, key)
				b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						write := rand.IntN(100) < 5
						var release func(context.Context) error
						switch {
						case kind == "lock":
							l, err := c.Acquire(ctx, key)
							if err != nil {
								b.Error(err)
								return
							}
							release = l.Release
						case write:
							g, err := rw.Lock(ctx, key)
							if err != nil {
								b.Error(err)
								return
							}
							release = g.Release
						default:
							g, err := rw.RLock(ctx, key)
							if err != nil {
								b.Error(err)
								return
							}
							release = g.Release
						}
						time.Sleep(time.Millisecond)
						_ = release(ctx)
					}
				})
			})
		}
	}
}

// warmUp establishes the backend's wake-up subscription outside the timing.
func warmUp(b *testing.B, be driver.Backend, key string) {
	var n driver.Notifier
	if driver.As(be, &n) {
		_, cancel, err := n.Watch(context.Background(), key, lockx.NewOwner())
		if err != nil {
			b.Fatal(err)
		}
		cancel()
	}
}
